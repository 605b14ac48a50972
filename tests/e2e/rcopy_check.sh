#!/usr/bin/env bash
# The client side of an rcopy test: copies a file of random bytes to an
# rcopy server (Debian's rdmacm-utils; rsockets over softverbs) and checks
# that the copy the server wrote is the same, byte for byte. The server
# runs on this machine (another process, or another network namespace):
# both see the same files.
#   rcopy_check.sh SERVER PORT BYTES
set -u
server=$1 port=$2 bytes=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
head -c "$bytes" /dev/urandom >"$dir/source" || exit 1
rcopy "$dir/source" "$server:$dir/copy" -p "$port" || { echo "rcopy failed: $?"; exit 1; }
cmp "$dir/source" "$dir/copy" || { echo "the copy differs from the source"; exit 1; }
echo "copied $bytes bytes intact"
