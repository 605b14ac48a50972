#!/usr/bin/env bash
# Port and GID events follow the host's network, as with a RoCE device: in a
# network namespace this test creates (its loopback down, so no address and
# no GID), the port is DOWN; bringing lo up gives it addresses, and Debian's
# ibv_asyncwatch must see IBV_EVENT_GID_CHANGE and IBV_EVENT_PORT_ACTIVE
# (ibv_devinfo then shows PORT_ACTIVE and the ::ffff:127.0.0.1 GID); taking
# it down again must give IBV_EVENT_PORT_ERR. Skipped (77) without the right
# to create namespaces.
set -u
ns=sv-port-$$
ip netns add "$ns" 2>/dev/null || { echo "cannot create network namespaces: skipped"; exit 77; }
out=$(mktemp -d)
watcher=
trap '[ -n "$watcher" ] && kill "$watcher" 2>/dev/null; ip netns del "$ns" 2>/dev/null; rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; echo "--- ibv_asyncwatch:"; cat "$out/events"; exit 1; }
in_ns() { ip netns exec "$ns" "$@"; }
# wait_for <pattern> <file>
wait_for() { for _ in $(seq 200); do grep -q "$1" "$2" && return 0; sleep 0.05; done; return 1; }

in_ns ibv_devinfo -v >"$out/before" 2>&1 || fail "ibv_devinfo in the namespace"
grep -q "state:.*PORT_DOWN" "$out/before" || fail "port not DOWN without addresses: $(grep state: "$out/before")"

in_ns timeout 60 ibv_asyncwatch >"$out/events" 2>&1 &
watcher=$!
wait_for "async event FD" "$out/events" || fail "ibv_asyncwatch did not start"

ip -n "$ns" link set lo up || fail "ip link set lo up"
wait_for "PORT_ACTIVE" "$out/events" || fail "no PORT_ACTIVE after lo up"
wait_for "GID_CHANGE" "$out/events" || fail "no GID_CHANGE after lo up"
in_ns ibv_devinfo -v >"$out/up" 2>&1 || fail "ibv_devinfo after lo up"
grep -q "state:.*PORT_ACTIVE" "$out/up" || fail "port not ACTIVE after lo up"
grep -q "::ffff:127.0.0.1" "$out/up" || fail "no ::ffff:127.0.0.1 GID after lo up"

ip -n "$ns" link set lo down || fail "ip link set lo down"
wait_for "PORT_ERR" "$out/events" || fail "no PORT_ERR after lo down"
in_ns ibv_devinfo -v >"$out/down" 2>&1 || fail "ibv_devinfo after lo down"
grep -q "state:.*PORT_DOWN" "$out/down" || fail "port not DOWN after lo down"

echo "--- ibv_asyncwatch:"; cat "$out/events"
echo "port events follow the namespace's addresses"
