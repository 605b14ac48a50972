#!/usr/bin/env bash
# A process that cannot start the thread holding its registry slot's
# liveness lock (at its task limit: here user nobody's RLIMIT_NPROC of 1)
# does not open the device: ibv_open_device fails (EAGAIN), said why. It
# used to open it with its slot marked live but the lock unheld, which
# every other process reads as dead: the next claim took the slot and the
# names from under it.
# usage: task_limit_open.sh  (ibv_devinfo from ibverbs-utils, on our library path)
set -u
. "$(dirname "$0")/as_nobody.sh"
need_nobody || exit
export SOFTVERBS_DOMAIN=tasklimit$$
trap 'rm -f /dev/shm/softverbs-tasklimit$$.v*' EXIT
out=$("${as_nobody[@]}" prlimit --nproc=1 ibv_devinfo 2>&1)
rc=$?
echo "$out (exit $rc)"
((rc != 0)) || { echo "FAIL: ibv_devinfo opened the device without the thread that keeps its slot"; exit 1; }
grep -q "cannot start the thread that holds this process's registry slot" <<<"$out" ||
  { echo "FAIL: the open failed without saying why"; exit 1; }
# The same user without the limit opens it.
"${as_nobody[@]}" ibv_devinfo >/dev/null 2>&1 || { echo "FAIL: without the limit the device does not open"; exit 1; }
echo "PASS: at its task limit a process is refused the device, and said why"
