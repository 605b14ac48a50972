#!/usr/bin/env bash
# The InfiniBand link-layer mode (SOFTVERBS_LINK_LAYER=infiniband): the port
# shows link layer InfiniBand and a LID, and Debian's pingpong tools run
# without -g, addressing each other by LID only (no GRH), as on an IB fabric.
#   ib_mode.sh [--hosts] TOOL [ARGS...]
# Server and client as tests/middleware/pair.sh runs them (--hosts: server
# in host A, 10.95.0.1, LID 0x0001; client in host B; RoCEv2 packets must
# cross the link). Both must report their iterations, and the client must
# have used A's LID and no GID (GID "::").
set -u
here=$(cd "$(dirname "$0")" && pwd)
hosts=()
[[ ${1:-} == --hosts ]] && { hosts=(--hosts); shift; }
tool=$1
shift
export SOFTVERBS_LINK_LAYER=infiniband
command -v "$tool" >/dev/null || { echo "$tool not installed"; exit 77; }

devinfo=$(ibv_devinfo -v)
grep -q "link_layer:.*InfiniBand" <<<"$devinfo" || { echo "the port's link layer is not InfiniBand:"; echo "$devinfo"; exit 1; }
lid=$(sed -n 's/^[[:space:]]*port_lid:[[:space:]]*//p' <<<"$devinfo")
((${#hosts[@]})) && lid=1  # 10.95.0.1 ends in 0x0001
echo "the server's port: link layer InfiniBand, LID $lid"
[[ -n $lid && $lid != 0 ]] || { echo "no LID"; exit 1; }

port=$((18700 + $$ % 200))
out=$("$here/../middleware/pair.sh" ${hosts[@]+"${hosts[@]}"} "tcp:$port" "iters in" -- \
  "$tool" -p "$port" "$@" -- "$tool" -p "$port" "$@" @A)
rc=$?
echo "$out"
((rc == 0)) || exit "$rc"
(($(grep -c "iters in" <<<"$out") >= 2)) || { echo "the server reported no iterations"; exit 1; }
# "remote address: LID 0x0001, QPN ..., GID ::": LID addressing, no GRH.
lid_hex=$(printf '0x%04x' "$lid")  # ibv_devinfo prints it in decimal, the tools in hex
client=$(sed -n '/^--- client/,$p' <<<"$out")
grep -Eq "remote address: +LID $lid_hex," <<<"$client" || { echo "the client did not use the server's LID $lid_hex"; exit 1; }
grep -Eq "remote address: .*GID ::$" <<<"$client" || { echo "a GID was used (no LID-only addressing)"; exit 1; }
exit 0
