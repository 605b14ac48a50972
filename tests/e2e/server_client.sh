# Sourced by the e2e runners: runs a Debian tool as server and as client
# (two processes) over softverbs and keeps both outputs.
#   run_server_client TIMEOUT PORT CMD [ARGS...]
# The server runs CMD ARGS..., the client CMD ARGS... 127.0.0.1 once the
# server listens on PORT. Prints both outputs; returns non-zero unless both
# exit 0. The outputs stay in "$out/server" and "$out/client" until exit.
source "$(dirname "${BASH_SOURCE[0]}")/../common/tcp_port.sh"
out=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$out"' EXIT

run_server_client() {
  local limit=$1 port=$2
  shift 2
  "$(dirname "$0")/with_stacks.sh" "$limit" "$@" >"$out/server" 2>&1 &
  server=$!
  wait_tcp_port "$port" 10 "$server"  # before the client connects
  "$(dirname "$0")/with_stacks.sh" $((limit - 10)) "$@" 127.0.0.1 >"$out/client" 2>&1
  local client_rc=$?
  if [ $client_rc -ne 0 ]; then kill -USR1 $server 2>/dev/null; fi  # a lone server would wait forever
  wait $server
  local server_rc=$?
  server=
  echo "--- server ($*): exit $server_rc"; cat "$out/server"
  echo "--- client: exit $client_rc"; cat "$out/client"
  [ $server_rc -eq 0 ] && [ $client_rc -eq 0 ]
}
