#!/usr/bin/env bash
# A middleware tool as server and client, two processes, each started the
# way the README tells a user: `softverbs-run COMMAND` (no LD_LIBRARY_PATH,
# no /dev/infiniband of the host's). Both must exit 0.
#   pair.sh [--hosts] READY [EXPECT] -- SERVER_CMD... -- CLIENT_CMD...
# READY: when the client may start
#   tcp:PORT      the server listens on TCP PORT (ucx_perftest, fi_pingpong)
#   output:REGEX  the server printed a line matching REGEX
# EXPECT: a regex the client's output must match ("" for none).
# @A in a command is the server's address: 127.0.0.1, or with --hosts host
# A's address on the link between two hosts made of network namespaces
# (server in A, client in B). Between hosts, RoCEv2 packets must have left
# host B (an nftables counter on UDP 4791): the traffic went over the link.
# Environment: SOFTVERBS_RUN (the launcher), LIMIT (seconds, default 60),
# SERVER_RUNS_FOREVER=1 (the server is stopped once the client passed).
set -u
source "$(dirname "$0")/../common/tcp_port.sh"
here=$(cd "$(dirname "$0")" && pwd)
hosts=0
[[ ${1:-} == --hosts ]] && { hosts=1; shift; }
ready=$1 expect=$2
shift 2
[[ ${1:-} == -- ]] && shift
server_cmd=()
while [[ $# -gt 0 && $1 != -- ]]; do server_cmd+=("$1"); shift; done
shift
client_cmd=("$@")
limit=${LIMIT:-60}
run=${SOFTVERBS_RUN:?the softverbs-run launcher}
command -v "${server_cmd[0]}" >/dev/null || { echo "${server_cmd[0]} not installed"; exit 77; }

out=$(mktemp -d)
server=
a="" b=""
cleanup() {
  [[ -n $server ]] && kill "$server" 2>/dev/null
  [[ -n $a ]] && ip netns del "$a" 2>/dev/null
  [[ -n $b ]] && ip netns del "$b" 2>/dev/null
  rm -rf "$out"
}
trap cleanup EXIT

in_a=() in_b=()
addr=127.0.0.1
if ((hosts)); then
  a=svmA$$ b=svmB$$ va=svma$$ vb=svmb$$
  source "$here/../e2e/two_hosts.sh"
  make_two_hosts 10.95.0 || exit $?
  addr=10.95.0.1
  in_a=(ip netns exec "$a") in_b=(ip netns exec "$b")
  count_roce_sent "$b" || exit $?
fi
server_cmd=("${server_cmd[@]//@A/$addr}")
client_cmd=("${client_cmd[@]//@A/$addr}")

"${in_a[@]}" "$here/../e2e/with_stacks.sh" "$limit" "$run" stdbuf -oL -eL "${server_cmd[@]}" >"$out/server" 2>&1 &
server=$!
is_ready=0
for _ in $(seq 200); do
  case $ready in
    tcp:*) tcp_listens ${in_a[0]:+-n "$a"} "${ready#tcp:}" && { is_ready=1; break; } ;;
    output:*) grep -Eq -- "${ready#output:}" "$out/server" && { is_ready=1; break; } ;;
  esac
  kill -0 $server 2>/dev/null || break
  sleep 0.05
done
# A server alive after 10 s that never showed READY: the test's READY is
# wrong (it cost 10 s and proved nothing), not the server.
if ((!is_ready)) && kill -0 $server 2>/dev/null; then
  echo "server never became ready ($ready)"; cat "$out/server"; exit 1
fi
"${in_b[@]}" "$here/../e2e/with_stacks.sh" $((limit - 5)) "$run" "${client_cmd[@]}" >"$out/client" 2>&1
client_rc=$?
if [[ -n ${SERVER_RUNS_FOREVER:-} ]] && ((client_rc == 0)); then
  # A server that never exits by itself (io_demo): alive until now means it
  # survived the whole run; stopped, it counts a pass.
  if kill $server 2>/dev/null; then wait $server; server_rc=0; else wait $server; server_rc=$?; fi
else
  ((client_rc)) && kill -USR1 $server 2>/dev/null  # a lone server would wait forever
  wait $server
  server_rc=$?
fi
server=
echo "--- server (${server_cmd[*]}): exit $server_rc"; cat "$out/server"
echo "--- client (${client_cmd[*]}): exit $client_rc"; cat "$out/client"
((server_rc == 0 && client_rc == 0)) || exit 1
if [[ -n $expect ]] && ! grep -Eq -- "$expect" "$out/client"; then
  echo "client output does not match: $expect"; exit 1
fi
if ((hosts)); then
  roce_crossed_link "$b" || exit 1
fi
exit 0
