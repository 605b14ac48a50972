#!/usr/bin/env bash
# The InfiniBand link-layer mode (SOFTVERBS_LINK_LAYER=infiniband): the port
# shows link layer InfiniBand and a LID, and Debian's pingpong tools run
# without -g, addressing each other by LID only (no GRH), as on an IB fabric.
#   ib_mode.sh [--hosts] TOOL [ARGS...]
# --hosts: server in host A (10.98.0.1, LID 0x1), client in host B
# (10.98.0.2, LID 0x2), network namespaces on a veth link; RoCEv2 packets
# must cross it. Both tools must report their iterations, each must have
# printed the peer's LID it used, and no GID (GID "::").
set -u
here=$(cd "$(dirname "$0")" && pwd)
hosts=0
[[ ${1:-} == --hosts ]] && { hosts=1; shift; }
tool=$1
shift
export SOFTVERBS_LINK_LAYER=infiniband
command -v "$tool" >/dev/null || { echo "$tool not installed"; exit 77; }
out=$(mktemp -d)
server=
a="" b=""
cleanup() {
  [[ -n $server ]] && kill "$server" 2>/dev/null
  [[ -n $a ]] && ip netns del "$a" 2>/dev/null
  [[ -n $b ]] && ip netns del "$b" 2>/dev/null
  rm -rf "$out"
}
trap cleanup EXIT

in_a=() in_b=() addr=127.0.0.1
if ((hosts)); then
  a=ibA$$ b=ibB$$ va=iba$$ vb=ibb$$
  . "$here/two_hosts.sh"
  make_two_hosts 10.98.0 || exit $?
  in_a=(ip netns exec "$a") in_b=(ip netns exec "$b") addr=10.98.0.1
  count_roce_sent "$b" || exit $?
fi

port=$((18700 + $$ % 200))
"${in_a[@]}" ibv_devinfo -v >"$out/devinfo"
grep -q "link_layer:.*InfiniBand" "$out/devinfo" || { echo "the port's link layer is not InfiniBand:"; cat "$out/devinfo"; exit 1; }
lid=$(sed -n 's/^[[:space:]]*port_lid:[[:space:]]*//p' "$out/devinfo")
echo "host A's port: link layer InfiniBand, LID $lid"
[[ -n $lid && $lid != 0 ]] || { echo "no LID"; exit 1; }

"${in_a[@]}" "$here/with_stacks.sh" 60 "$tool" -p "$port" "$@" >"$out/server" 2>&1 &
server=$!
for _ in $(seq 100); do
  "${in_a[@]}" ss -ltn 2>/dev/null | grep -q ":$port " && break
  sleep 0.1
done
"${in_b[@]}" "$here/with_stacks.sh" 50 "$tool" -p "$port" "$@" "$addr" >"$out/client" 2>&1
client_rc=$?
((client_rc)) && kill -USR1 $server 2>/dev/null
wait $server
server_rc=$?
server=
echo "--- server: exit $server_rc"; cat "$out/server"
echo "--- client: exit $client_rc"; cat "$out/client"
((server_rc == 0 && client_rc == 0)) || exit 1
grep -q "iters in" "$out/client" && grep -q "iters in" "$out/server" || { echo "no iterations reported"; exit 1; }
# "remote address: LID 0x0001, QPN ..., GID ::": LID addressing, no GRH.
lid_hex=$(printf '0x%04x' "$lid")  # ibv_devinfo prints it in decimal, the tools in hex
grep -Eq "remote address: +LID $lid_hex," "$out/client" || { echo "the client did not use A's LID $lid_hex"; exit 1; }
grep -Eq "remote address: .*GID ::$" "$out/client" || { echo "a GID was used (no LID-only addressing)"; exit 1; }
if ((hosts)); then
  roce_crossed_link "$b" || exit 1
fi
exit 0
