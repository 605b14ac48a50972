#!/usr/bin/env bash
# A same-host rdma_cm server with far fewer open files than client processes
# (issue 39, item 4): ucmatose -c 64, held to 40 open files, against 64
# client processes. It holds all 64 connections at once (it starts its
# transfers only when every one is established): same-host connections
# cost it no descriptor each, only its requests not answered yet do
# (cm_link.h). Before, each client process took the server a descriptor (a
# link) for as long as it was connected: past ~30, connects waited for ever.
#
# The connects that arrive together can still run the server out while
# their REQs wait for it: it must say so once at most, at the default log
# level, and not spin on the connects it cannot take yet (level-triggered,
# they woke its every pump: 11000 failed accepts in 8 s); and its verbs need
# no new descriptor (a GID query that could not read the interfaces took
# the table for empty, and rdma_accept failed with EINVAL, "cmatose: failing
# connection request").
set -u
. "$(dirname "$0")/../common/tcp_port.sh"
port=${1:-19816}
clients=${2:-64}
work=$(mktemp -d)
pids=()
cleanup() {
  ((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
timeout 30 prlimit --nofile=40 stdbuf -oL -eL ucmatose -c "$clients" -C 4 -p "$port" >"$work/server" 2>&1 &
server_timeout=$!
pids+=($server_timeout)
server=
# (timeout's child; not pgrep: procps deadlocks at start under the ASan
# job's LD_PRELOAD, in textdomain's lock)
for _ in $(seq 100); do
  read -r server _ <"/proc/$server_timeout/task/$server_timeout/children" 2>/dev/null
  [[ -n $server ]] && break
  sleep 0.02
done
[[ -n $server ]] || { echo "the server did not start"; exit 1; }
wait_cm_port "$port" 5 "$server"
client_pids=()
for i in $(seq "$clients"); do
  timeout 30 ucmatose -s 127.0.0.1 -c 1 -C 4 -p "$port" >"$work/client.$i" 2>&1 &
  client_pids+=($!)
  pids+=($!)
done
# The server's CPU time and descriptors while it runs: the last sample
# before it exits.
cpu() { awk '{print $14 + $15}' "/proc/$server/stat" 2>/dev/null; }
ticks=0 sockets=0 most_sockets=0
while kill -0 "$server" 2>/dev/null; do
  t=$(cpu) && [[ -n $t ]] && ticks=$t
  sockets=$(ls -l "/proc/$server/fd" 2>/dev/null | grep -c socket)
  ((sockets > most_sockets)) && most_sockets=$sockets
  sleep 0.1
done
wait "$server_timeout"
server_rc=$?
failed=0
for pid in "${client_pids[@]}"; do wait "$pid" || failed=$((failed + 1)); done
fail=0
said=$(grep -c "out of file descriptors (RLIMIT_NOFILE 40)" "$work/server")
echo "server: exit $server_rc; $failed of $clients clients failed; at most $most_sockets sockets;" \
  "the limit said $said time(s); $ticks ticks of CPU"
((server_rc == 0)) || { echo "FAIL: the server did not finish its $clients connections"; fail=1; }
((failed == 0)) || { echo "FAIL: $failed clients failed"; fail=1; }
((said <= 1)) || { echo "FAIL: the limit must be said once at most"; fail=1; }
# Its work for 64 connections is a few ticks; a spin on the connects it
# cannot take costs about 13 a second.
((ticks < 300)) || { echo "FAIL: the server spins"; fail=1; }
if grep -q "failing connection\|failure accepting" "$work/server"; then
  echo "FAIL: a connection failed:"
  grep "fail" "$work/server"
  fail=1
fi
if ((fail)); then
  tail -20 "$work/server"
  for i in $(seq "$clients"); do grep -l "fail\|error" "$work/client.$i"; done | head -3 | xargs -r tail -n 5
fi
exit $fail
