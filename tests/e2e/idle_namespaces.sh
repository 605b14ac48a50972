#!/usr/bin/env bash
# What a network namespace's processes leave in the runtime directory and
# the sysfs views when the namespace itself goes, goes too, when the first
# process of a new namespace starts (shm/idle_namespaces.h): its registry,
# its RoCE forwarding and CM mailbox socket files, its sysfs view. A
# namespace that still exists (held by `ip netns add`, no process in it)
# keeps all of them.
set -u
g=svidG$$ k=svidK$$ f=svidF$$
rt=$(mktemp -d)  # the runtime directory of every process here (0700)
export SOFTVERBS_RUNTIME_DIR=$rt
views=/dev/shm/softverbs-uid$(id -u).sysfs
cleanup() { kill -9 $(jobs -p) 2>/dev/null; wait 2>/dev/null; for n in $g $k $f; do ip netns del $n 2>/dev/null; done; rm -rf "$rt"; }
trap cleanup EXIT
command -v cmtime >/dev/null || { echo "cmtime not installed"; exit 77; }
inode_of() { ip netns exec "$1" stat -L -c %i /proc/self/ns/net; }
state_of() {  # INODE: what of that namespace is here
  ls "$rt" | grep -E "^(registry\.v[0-9]+\.net|roce-|gsi-)$1" | sed "s/$1/<ns>/" | sort | tr '\n' ' '
  [[ -d $views/net$1 ]] && echo "sysfs-view"
  echo
}
# A process with an RC QP (its RoCE forwarding socket) and a CM listener
# (its mailbox file), both killed outright, as a test's would be.
leave_state() {
  local ns=$1 ino
  ino=$(inode_of "$ns")
  ip -n "$ns" link set lo up
  ip netns exec "$ns" ibv_rc_pingpong -g 0 >/dev/null 2>&1 &
  local qp=$!
  ip netns exec "$ns" cmtime -c 10 >/dev/null 2>&1 &
  local cm=$!
  for _ in $(seq 200); do
    ls "$rt" | grep -q "^roce-$ino-" && ls "$rt" | grep -q "^gsi-$ino-.*gsi-tcp" && break
    sleep 0.05
  done
  kill -9 $qp $cm
  wait $qp $cm 2>/dev/null
}

ip netns add "$g" && ip netns add "$k" || exit 1
leave_state "$g"
leave_state "$k"
ino_g=$(inode_of "$g") ino_k=$(inode_of "$k")
ip netns add "$f"  # (made while G lives: its inode is another)
ino_f=$(inode_of "$f")
rm -rf "$views/net$ino_f"  # (a view of a namespace that had this inode before: stale)
before_g=$(state_of "$ino_g") before_k=$(state_of "$ino_k")
echo "namespace G ($ino_g), its processes killed: $before_g"
echo "namespace K ($ino_k), its processes killed: $before_k"
fail=0
for b in "$before_g" "$before_k"; do
  [[ $b == *gsi-tcp* && $b == *registry.v* && $b == *roce-* && $b == *sysfs-view* ]] ||
    { echo "FAIL: a killed process should have left these (the test sees nothing to sweep)"; fail=1; }
done
ip netns del "$g"
ip netns exec "$f" ibv_devinfo >/dev/null || { echo "FAIL: ibv_devinfo in a new namespace"; fail=1; }
after_g=$(state_of "$ino_g") after_k=$(state_of "$ino_k")
echo "after the first process of a new namespace: G (gone): '${after_g}'; K (still there): $after_k"
[[ -z ${after_g// /} ]] || { echo "FAIL: the gone namespace's state is still there"; fail=1; }
[[ $after_k == "$before_k" ]] || { echo "FAIL: the namespace that is still there lost its state"; fail=1; }
# K's processes come again: its registry (with its dead slots) is theirs.
ip netns exec "$k" ibv_devinfo >/dev/null || { echo "FAIL: ibv_devinfo in K"; fail=1; }
exit $fail
