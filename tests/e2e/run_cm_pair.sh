#!/usr/bin/env bash
# Runs one of Debian's rdmacm tools as server and client (two processes)
# over softverbs; both must exit 0.
#   run_cm_pair.sh READY SERVER_CMD... -- CLIENT_CMD...
# READY says when the client may start:
#   listen:PORT    a connection-manager listener holds PORT (our listeners
#                  are abstract unix sockets named ...-cm-<ps>-<addr>:<port>)
#   output:REGEX   the server printed a line matching REGEX
#   tcp:PORT       a TCP socket listens on PORT (qperf's rendezvous)
# EXPECT_CLIENT / EXPECT_SERVER (optional): regexes the outputs must match.
# UNEXPECTED (optional): a regex neither output may match (cmtime reports
#   failed connections and still exits 0).
# SERVER_RUNS_FOREVER=1: the server never exits by itself (cmtime in v44);
#   it must still be running 1.3 s after the client is done, and is then
#   stopped.
set -u
source "$(dirname "$0")/../common/tcp_port.sh"
ready=$1
shift
server_cmd=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do server_cmd+=("$1"); shift; done
shift
client_cmd=("$@")
limit=${LIMIT:-60}

out=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$out"' EXIT

# Line-buffered, so READY=output:... sees lines as they are printed.
"$(dirname "$0")/with_stacks.sh" "$limit" stdbuf -oL -eL "${server_cmd[@]}" >"$out/server" 2>&1 &
server=$!
for _ in $(seq 200); do
  case $ready in
    listen:*) ss -xl 2>/dev/null | grep -q -- "-cm-[a-z]*-.*:${ready#listen:} " && break ;;
    output:*) grep -Eq -- "${ready#output:}" "$out/server" && break ;;
    tcp:*) tcp_listens "${ready#tcp:}" && break ;;
  esac
  kill -0 $server 2>/dev/null || break
  sleep 0.05
done
"$(dirname "$0")/with_stacks.sh" $((limit - 5)) "${client_cmd[@]}" >"$out/client" 2>&1
client_rc=$?
if [ -n "${SERVER_RUNS_FOREVER:-}" ] && [ $client_rc -eq 0 ]; then
  # Alive until now means it survived the whole run: stop it, count it a
  # pass. A moment first: a peer process that exited is noticed within the
  # CM's link timer's second (cm_link.h), and the server must outlive that
  # too (cmtime's died of a CONNECT_ERROR for a child whose RTU its client
  # took with it).
  sleep 1.3
  if kill $server 2>/dev/null; then wait $server; server_rc=0; else wait $server; server_rc=$?; fi
else
  [ $client_rc -ne 0 ] && kill -USR1 $server 2>/dev/null  # a lone server would wait forever
  wait $server
  server_rc=$?
fi
server=
echo "--- server (${server_cmd[*]}): exit $server_rc"; cat "$out/server"
echo "--- client (${client_cmd[*]}): exit $client_rc"; cat "$out/client"
[ $server_rc -eq 0 ] && [ $client_rc -eq 0 ] || exit 1
if [ -n "${EXPECT_SERVER:-}" ] && ! grep -Eq -- "$EXPECT_SERVER" "$out/server"; then
  echo "server output does not match: $EXPECT_SERVER"; exit 1
fi
if [ -n "${UNEXPECTED:-}" ] && grep -Eq -- "$UNEXPECTED" "$out/server" "$out/client"; then
  echo "output matches what must not be there: $UNEXPECTED"; exit 1
fi
if [ -n "${EXPECT_CLIENT:-}" ] && ! grep -Eq -- "$EXPECT_CLIENT" "$out/client"; then
  echo "client output does not match: $EXPECT_CLIENT"; exit 1
fi
exit 0
