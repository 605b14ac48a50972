# Sourced by e2e scripts: one of Debian's server/client tools (the pingpong
# tools, perftest) run as two processes, each with its own environment.
#   tool_pair OUT 'SERVER_ENV' 'CLIENT_ENV' TOOL [ARGS...]
# The server runs `env SERVER_ENV TOOL ARGS -p $port`, the client the same
# with CLIENT_ENV and 127.0.0.1 once the server listens. The client's output
# goes to OUT, the server's to OUT.server; returns the client's status. The
# server is stopped after the client (it may wait for a client that failed).
# The caller sets `port` (advanced by one per pair, so a lingering socket
# never meets the next pair) and `pids` (for its EXIT trap).
source "$(dirname "${BASH_SOURCE[0]}")/tcp_port.sh"

tool_pair() {
  local out=$1
  local -a server_env=($2) client_env=($3)  # (words: VAR=value, no blanks inside)
  shift 3
  env "${server_env[@]}" timeout 30 "$@" -p "$port" >"$out.server" 2>&1 &
  local server=$!
  pids+=("$server")
  if [[ " $* " == *" -R "* ]]; then wait_cm_port "$port" 10 "$server"; else wait_tcp_port "$port" 10 "$server"; fi
  env "${client_env[@]}" timeout 30 "$@" -p "$port" 127.0.0.1 >"$out" 2>&1
  local rc=$?
  kill "$server" 2>/dev/null
  wait "$server" 2>/dev/null
  port=$((port + 1))
  return $rc
}
