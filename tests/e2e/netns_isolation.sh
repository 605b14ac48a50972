#!/usr/bin/env bash
# Two hosts made of network namespaces (created here, deleted on exit) both
# have 127.0.0.1 in their GID table. A UD ping-pong addressed to it across them must
# not arrive: from host B, 127.0.0.1 is B itself. (The registry of QPs in
# shared memory spans the machine; it used to deliver to the QP number in
# the other namespace, and udpong and mckey "worked" between hosts without
# a packet on the link.) The client must time out; the same tools over the
# veth's GIDs pass in e2e_roce_ud_pingpong.
set -u
a=niA$$ b=niB$$ va=nia$$ vb=nib$$
# Registries of our own, new: a namespace's inode number is reused at once,
# and a registry a deleted namespace of that number left (until a sweep
# finds it, shm/idle_namespaces.h) gave the server and the client slots in
# an order this test cannot foresee (both had slot 3 once in CI).
rt=$(mktemp -d)
export SOFTVERBS_RUNTIME_DIR=$rt
cleanup() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; rm -rf "$rt"; }
trap cleanup EXIT
. "$(dirname "$0")/two_hosts.sh"
make_two_hosts 10.94.0 || exit
ga=$(ip netns exec "$a" "$(dirname "$0")/../common/loopback_gid.sh") && gb=$(ip netns exec "$b" "$(dirname "$0")/../common/loopback_gid.sh") ||
  { echo "no ::ffff:127.0.0.1 GID"; exit 1; }
ip netns exec "$a" timeout 8 ibv_ud_pingpong -g "$ga" -n 5 >/dev/null 2>&1 &
server=$!
# Each namespace host has a registry of its own, so the client, the first
# process of host B, would get the server's QPN (0x010000) and send to its
# own QP, as a NIC would: a process of B holds B's first slot meanwhile.
ip netns exec "$b" timeout 8 ibv_ud_pingpong -g "$gb" -p 18516 -n 5 >/dev/null 2>&1 &
holder=$!
sleep 0.5
out=$(ip netns exec "$b" timeout 4 stdbuf -oL ibv_ud_pingpong -g "$gb" -n 5 10.94.0.1 2>&1)
rc=$?
echo "$out"
kill "$server" "$holder" 2>/dev/null; wait "$server" "$holder" 2>/dev/null
qpns=$(grep -o 'QPN 0x[0-9a-f]*' <<<"$out" | sort -u | wc -l)
if ((qpns == 1)); then
  echo "the client's QPN is the server's: the test proves nothing"; exit 1
fi
if ((rc == 0)); then
  echo "the ping-pong to the other namespace's 127.0.0.1 completed: shared memory crossed namespaces"
  exit 1
fi
echo "client gave up (exit $rc): 127.0.0.1 of another namespace is not reached, as on a real network"
