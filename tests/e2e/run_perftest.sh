#!/usr/bin/env bash
# Runs one of Debian's perftest tools as server and client (two processes)
# over softverbs. Both must exit 0 and the client must print a results row.
#   run_perftest.sh PORT TOOL [ARGS...]      (ARGS for both sides)
set -u
port=$1 tool=$2
shift 2
. "$(cd "$(dirname "$0")" && pwd)/server_client.sh"
run_server_client 150 "$port" "$tool" -d softverbs0 -p "$port" "$@" || exit 1
# A results row: the message size followed by numbers.
grep -Eq '^ *[0-9]+ +[0-9]+ +[0-9.]+' "$out/client"
