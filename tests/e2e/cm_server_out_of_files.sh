#!/usr/bin/env bash
# A same-host rdma_cm server at its RLIMIT_NOFILE (issue 39, item 5): each
# process it has connections with on this host takes one descriptor (a
# link, cm_link.h), so 30 client processes against a server held to 40 open
# files run it out. It must say so once, at the default log level; go on
# accepting what it can (its verbs need no new descriptor: a GID query that
# could not read the interfaces took the table for empty, and rdma_accept
# failed with EINVAL, "cmatose: failing connection request"); and not spin
# on the connects it cannot take yet (level-triggered, they woke its every
# pump: 11000 failed accepts in 8 s).
set -u
. "$(dirname "$0")/../common/tcp_port.sh"
port=${1:-19816}
work=$(mktemp -d)
pids=()
cleanup() {
  ((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
timeout 30 prlimit --nofile=40 stdbuf -oL -eL ucmatose -c 30 -p "$port" >"$work/server" 2>&1 &
pids+=($!)
server=
# (timeout's child; not pgrep: procps deadlocks at start under the ASan
# job's LD_PRELOAD, in textdomain's lock)
for _ in $(seq 100); do
  read -r server _ <"/proc/${pids[0]}/task/${pids[0]}/children" 2>/dev/null
  [[ -n $server ]] && break
  sleep 0.02
done
[[ -n $server ]] || { echo "the server did not start"; exit 1; }
wait_cm_port "$port" 5 "$server"
for i in $(seq 30); do
  timeout 30 ucmatose -s 127.0.0.1 -c 1 -p "$port" >"$work/client.$i" 2>&1 &
  pids+=($!)
done
# Once it has said so and taken what it can, the server's CPU time.
for _ in $(seq 200); do
  grep -q "out of file descriptors" "$work/server" && break
  sleep 0.05
done
cpu() { awk '{print $14 + $15}' "/proc/$server/stat"; }
sleep 1
before=$(cpu)
sleep 3
spent=$(($(cpu) - before))  # clock ticks (100 a second); the old spin: 38
fail=0
said=$(grep -c "out of file descriptors (RLIMIT_NOFILE 40)" "$work/server")
echo "server: the limit said $said time(s); $spent ticks of CPU in 3 s"
((said == 1)) || { echo "FAIL: the limit must be said once"; fail=1; }
((spent < 15)) || { echo "FAIL: the server spins on the connects it cannot take"; fail=1; }
if grep -q "failing connection\|failure accepting" "$work/server"; then
  echo "FAIL: a connection the server had a descriptor for failed:"
  grep "fail" "$work/server"
  fail=1
fi
links=$(ls -l "/proc/$server/fd" 2>/dev/null | grep -c socket)
echo "server holds $links sockets"
((links > 5)) || { echo "FAIL: the server took no links"; fail=1; }
((fail)) && cat "$work/server"
exit $fail
