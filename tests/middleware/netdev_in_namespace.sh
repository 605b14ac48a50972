#!/usr/bin/env bash
# In a network namespace with one veth, the device's sysfs view names that
# veth under device/net, alone: the loopback is no NIC's interface, and
# programs take the first entry for "the" netdev (rdma-core's tests took lo,
# which sorts first, bound 127.0.0.1 and got an id without a device).
# usage: netdev_in_namespace.sh SOFTVERBS_RUN
set -u
run=$1
a=sv-nd-a-$$ b=sv-nd-b-$$
ip netns add "$a" 2>/dev/null || { echo "cannot create network namespaces: skipped"; exit 77; }
trap 'ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null' EXIT
ip netns add "$b" || exit 1
ip link add sv-nd netns "$a" type veth peer name sv-nd-peer netns "$b" || exit 1
ip -n "$a" link set lo up && ip -n "$a" link set sv-nd up && ip -n "$a" addr add 10.79.0.1/24 dev sv-nd || exit 1
got=$(ip netns exec "$a" "$run" sh -c 'ls /sys/class/infiniband/*/device/net/')
echo "device/net: $got"
[ "$got" = sv-nd ] || { echo "FAIL: device/net should hold sv-nd alone"; exit 1; }
echo PASS
