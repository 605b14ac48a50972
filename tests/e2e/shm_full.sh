#!/usr/bin/env bash
# A full /dev/shm is an error the verb returns, never a signal, and the
# device works again once there is room. In a mount namespace of its own
# with a small tmpfs on /dev/shm (4 MiB: room for two registries, 1.3 MiB
# each with 4096 slots and their tables of name blocks):
#  1. /dev/shm full before the registry exists: ibv_open_device fails with
#     ENOSPC (was SIGBUS: the registry's pages were touched after ftruncate);
#     once space is freed, it opens.
#  2. /dev/shm full after the registry exists: a RoCE connection between two
#     namespace hosts still runs (was SIGBUS in ibv_modify_qp to RTR, from
#     the RoCE counters file), with a warning that there are no counters.
set -u
a=sfshA$$ b=sfshB$$ va=sfsha$$ vb=sfshb$$
cleanup() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; }
trap cleanup EXIT
. "$(dirname "$0")/two_hosts.sh"
make_two_hosts 10.96.0 || exit
export a b here=$(dirname "$0")
# (Not exec: the namespaces are deleted by this shell's trap, outside the
# private mount namespace; an exec'd shell left two behind every run.)
unshare -m bash -c '
set -u
. "$here/two_hosts.sh"
mount -t tmpfs -o size=4m tmpfs /dev/shm || { echo "cannot mount a private /dev/shm: skipped"; exit 77; }
fill() { dd if=/dev/zero of=/dev/shm/fill bs=4k 2>/dev/null; }
fail=0
fill
ip netns exec "$a" ibv_devinfo >/tmp/shmfull.$$ 2>&1; rc=$?
echo "--- /dev/shm full, no registry: ibv_devinfo exit $rc"; cat /tmp/shmfull.$$
grep -q "registry.*No space left on device" /tmp/shmfull.$$ || { echo "FAIL: no ENOSPC error naming the registry"; fail=1; }
rm -f /tmp/shmfull.$$
((rc > 0 && rc < 128)) || { echo "FAIL: ibv_devinfo exit $rc (a signal, or it opened a device it has no registry for)"; fail=1; }
rm -f /dev/shm/fill
ip netns exec "$a" ibv_devinfo >/dev/null 2>&1 && echo "space freed: ibv_devinfo opens the device" ||
  { echo "FAIL: the device does not open once /dev/shm has room"; fail=1; }
# (Each namespace host has a registry of its own: host B makes its own too.)
ip netns exec "$b" ibv_devinfo >/dev/null 2>&1 || { echo "FAIL: host B cannot open the device"; fail=1; }
ls /dev/shm/softverbs-uid$(id -u)/registry.v* >/dev/null || { echo "FAIL: no registry was made"; fail=1; }
fill
ga=$(gid_of "$a" ::ffff:10.96.0.1) gb=$(gid_of "$b" ::ffff:10.96.0.2)
[[ -n $ga && -n $gb ]] || { echo "FAIL: no GIDs with /dev/shm full"; exit 1; }
ip netns exec "$a" timeout 60 ibv_rc_pingpong -g "$ga" -n 200 >/tmp/shmfull-s.$$ 2>&1 & s=$!
sleep 0.5
ip netns exec "$b" timeout 60 ibv_rc_pingpong -g "$gb" -n 200 10.96.0.1 >/tmp/shmfull-c.$$ 2>&1; crc=$?
wait $s; src=$?
echo "--- /dev/shm full, registry made: RC pair between hosts, exits $src/$crc"
tail -2 /tmp/shmfull-s.$$; tail -2 /tmp/shmfull-c.$$
((src == 0 && crc == 0)) || { echo "FAIL: the RC pair did not finish"; fail=1; }
grep -q "no RoCEv2 counters" /tmp/shmfull-c.$$ /tmp/shmfull-s.$$ || { echo "FAIL: no warning that the counters are missing"; fail=1; }
rm -f /tmp/shmfull-s.$$ /tmp/shmfull-c.$$
exit $fail
'
exit $?
