#!/usr/bin/env bash
# Local loopback of raw packet QPs on a real interface (not lo), as a NIC
# with two user contexts open does it: frames one context's raw QP sends
# reach a flow-steered raw QP of another context of the device (rdma-core's
# test_flow and test_rss_traffic send from one context to another), not the
# sender's own. The interface is one end of a veth pair, both ends in a
# namespace this test makes: what is sent stays there. Skipped (77) without
# the right to make one.
#   raw_loopback_netns.sh RAW_ETH_TOOL
set -u
tool=$1
ns=sv-rawlo-$$
ip netns add "$ns" 2>/dev/null || { echo "cannot create network namespaces: skipped"; exit 77; }
trap 'ip netns del "$ns" 2>/dev/null' EXIT
ip -n "$ns" link add sv-lo-a type veth peer name sv-lo-b || exit 1
ip -n "$ns" link set sv-lo-a up && ip -n "$ns" link set sv-lo-b up || exit 1
mac=02:5e:00:00:00:99
ip netns exec "$ns" env SOFTVERBS_NETDEV=sv-lo-a timeout 60 "$tool" loop "$mac" 20
