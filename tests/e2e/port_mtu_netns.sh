#!/usr/bin/env bash
# The port's MTU follows the link, as Linux rxe's does, in two network
# namespaces this test creates (joined by a veth pair; deleted at the end):
#  - ibv_devinfo: active_mtu is the IB MTU of the first network interface's
#    MTU less 80 bytes of headers (1500 -> 1024 (3)), max_mtu 4096 (5); with
#    only loopback up, 4096
#  - a running process sees the MTU change (ip link set ... mtu) without
#    reopening the device (the link watcher)
#  - UD over the network: on a 2100-byte link (active_mtu 1024, though a
#    2000-byte message would fit the IP MTU) messages up to 1024 bytes
#    arrive; longer ones complete successfully and are not sent (IBTA
#    C10-93.1.1, as rxe)
#  - UD inside one namespace (shared memory, no link): up to 4096 bytes
#    arrive, whatever the port's active MTU; longer ones are not delivered
# Skipped (77) without the right to create namespaces.
#   port_mtu_netns.sh PORT_MTU_TOOL
set -u
tool=$1
a=sv-mtu-a-$$ b=sv-mtu-b-$$ va=sv-mva$$ vb=sv-mvb$$
out=$(mktemp -d)
watcher=
cleanup() {
  [[ -n $watcher ]] && kill "$watcher" 2>/dev/null
  ip netns del "$a" 2>/dev/null
  ip netns del "$b" 2>/dev/null
  rm -rf "$out"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
. "$(dirname "$0")/two_hosts.sh"
make_two_hosts 10.97.0 || exit

devinfo_mtu() {  # "active max" as ibv_devinfo prints them in namespace $1, e.g. "1024 (3) 4096 (5)"
  local v
  v=$(ip netns exec "$1" ibv_devinfo) || return 1
  echo "$(sed -nE 's/^[[:space:]]*active_mtu:[[:space:]]*(.*)$/\1/p' <<<"$v") $(sed -nE 's/^[[:space:]]*max_mtu:[[:space:]]*(.*)$/\1/p' <<<"$v")"
}

# 1. ibv_devinfo, as rxe on the same links.
m=$(devinfo_mtu "$a"); echo "veth 1500: $m"
[[ $m == "1024 (3) 4096 (5)" ]] || fail "1500-byte link: expected active_mtu 1024 (3), max_mtu 4096 (5), got $m"
ip -n "$a" link set "$va" mtu 9000 || fail "ip link set mtu 9000"
m=$(devinfo_mtu "$a"); echo "veth 9000: $m"
[[ $m == "4096 (5) 4096 (5)" ]] || fail "9000-byte link: expected 4096 (5), got $m"
ip -n "$a" link set "$va" mtu 1280 || fail "ip link set mtu 1280"
m=$(devinfo_mtu "$a"); echo "veth 1280: $m"
[[ $m == "1024 (3) 4096 (5)" ]] || fail "1280-byte link: expected 1024 (3), got $m"
ip -n "$a" link set "$va" down || fail "ip link set down"
m=$(devinfo_mtu "$a"); echo "loopback only: $m"
[[ $m == "4096 (5) 4096 (5)" ]] || fail "loopback only: expected 4096 (5), got $m"
ip -n "$a" link set "$va" mtu 1500 up || fail "ip link set up"

# 2. A running process follows the link.
coproc WATCH { ip netns exec "$a" timeout 60 "$tool" port; }
watcher=$WATCH_PID
query() { echo q >&"${WATCH[1]}" && read -r -t 5 line <&"${WATCH[0]}" && echo "$line"; }
expect_live() {  # $1: the active MTU in bytes it must report within 3 s
  local got
  for _ in $(seq 60); do
    got=$(query) || fail "the port watcher stopped"
    [[ $got == "active_mtu $1 max_mtu 4096" ]] && { echo "live: $got"; return 0; }
    sleep 0.05
  done
  fail "running process: expected active_mtu $1, still $got"
}
expect_live 1024
ip -n "$a" link set "$va" mtu 9000 && expect_live 4096
ip -n "$a" link set "$va" mtu 1100 && expect_live 512  # 1100 - 80 = 1020 bytes of room
ip -n "$a" link set "$va" mtu 1500 && expect_live 1024
exec {WATCH[1]}>&-
wait "$watcher" 2>/dev/null
watcher=

# 3. UD over the network on a 2100-byte link: the port says 1024 (2100 - 80
# = 2020), and a 2000-byte message, which the IP MTU would carry, is not sent.
ip -n "$a" link set "$va" mtu 2100 && ip -n "$b" link set "$vb" mtu 2100 || fail "ip link set mtu 2100"
m=$(devinfo_mtu "$b"); echo "veth 2100: $m"
[[ $m == "1024 (3) 4096 (5)" ]] || fail "2100-byte link: expected 1024 (3), got $m"
ga=$(gid_of "$a" ::ffff:10.97.0.1) gb=$(gid_of "$b" ::ffff:10.97.0.2)
[[ -n $ga && -n $gb ]] || fail "no GID for the veth addresses ($ga/$gb)"
ud_case() {  # $1 sender namespace, $2 its GID index, $3 destination GID, $4 expected "received" lines; lengths follow
  local ns=$1 sgid=$2 dgid=$3 expect=$4
  shift 4
  # Emptied here, not by the receiver's redirection: the wait below must not
  # read the previous case's "qpn" line before the new receiver's shell
  # truncates the file.
  : >"$out/recv"
  ip netns exec "$a" timeout 30 "$tool" recv 2500 >"$out/recv" 2>&1 &
  local receiver=$!
  for _ in $(seq 100); do grep -q "^qpn" "$out/recv" && break; sleep 0.05; done
  local qpn
  qpn=$(sed -n 's/^qpn //p' "$out/recv")
  [[ -n $qpn ]] || fail "receiver did not start: $(cat "$out/recv")"
  ip netns exec "$ns" timeout 30 "$tool" send "$sgid" "$dgid" "$qpn" "$@" >"$out/send" 2>&1
  local send_rc=$?
  wait $receiver
  local recv_rc=$?
  echo "--- sender ($ns, GID $dgid): exit $send_rc"; cat "$out/send"
  echo "--- receiver: exit $recv_rc"; cat "$out/recv"
  ((send_rc == 0 && recv_rc == 0)) || fail "UD exchange failed"
  [[ $(grep -c "IBV_WC_SUCCESS\|success" "$out/send") == $# ]] || fail "every send must complete successfully"
  [[ $(grep "^received" "$out/recv" | xargs) == "$expect" ]] || fail "expected \"$expect\" to arrive"
}
ud_case "$b" "$gb" ::ffff:10.97.0.1 "received 1024 received 1024" 1024 2000 4096 1024

# 4. Inside namespace A (shared memory): no link to fit, up to max_mtu (4096)
# arrives although the port's active MTU is 1024.
ud_case "$a" "$ga" ::ffff:10.97.0.1 "received 4096 received 1024" 4096 4097 1024
echo "the port MTU follows the link"
