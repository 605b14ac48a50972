#!/usr/bin/env bash
# Device profiles (SOFTVERBS_PROFILE) as programs nobody here wrote see
# them: ibv_devinfo shows the profile's device; a profile file overrides a
# built-in one; a profile that names nothing lists no device (and says
# why); on siw, which has no atomics, perftest's ib_atomic_lat cannot post
# while on softverbs' own it runs; perftest knows the ConnectX-6 and sends
# inline on it; ibv_rc_pingpong runs under each.
#   profiles_e2e.sh SOURCE_DIR
set -u
here=$1
source "$here/../common/tool_pair.sh"
command -v ibv_devinfo >/dev/null || { echo "ibverbs-utils not installed"; exit 77; }
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT
fail=0
check() { if "${@:2}"; then echo "ok:   $1"; else echo "FAIL: $1"; fail=1; fi; }
shows() { grep -Eq "^[[:space:]]*$2:[[:space:]]+$3\b" <<<"$1"; }

rxe=$(SOFTVERBS_PROFILE=rxe ibv_devinfo -v 2>&1)
cx6=$(SOFTVERBS_PROFILE=cx6 ibv_devinfo -v 2>&1)
check "rxe: max_cqe 32767 (RXE_MAX_CQE)" shows "$rxe" max_cqe 32767
check "rxe: max_mw 4096 (RXE_MAX_MW)" shows "$rxe" max_mw 4096
check "rxe: no on-demand paging" eval '! grep -A1 general_odp_caps <<<"$rxe" | grep -q ODP_SUPPORT'
check "cx6: on-demand paging" eval 'grep -A1 general_odp_caps <<<"$cx6" | grep -q ODP_SUPPORT'
check "rxe: max_msg_sz 0x800000 (RXE_PORT_MAX_MSG_SZ)" shows "$rxe" max_msg_sz 0x800000
siw=$(SOFTVERBS_PROFILE=siw ibv_devinfo -v 2>&1)
check "siw: vendor_id 0x626d74 (SIW_VENDOR_ID)" shows "$siw" vendor_id 0x626d74
check "siw: max_sge 6 (SIW_MAX_SGE)" shows "$siw" max_sge 6
check "siw: atomic_cap ATOMIC_NONE" shows "$siw" atomic_cap ATOMIC_NONE

cat >"$work/mine.profile" <<'EOF'
# rxe, with fewer work requests and SGEs
base = rxe
name = small-rxe
max_qp_wr = 256
max_sge = 4
EOF
mine=$(SOFTVERBS_PROFILE="$work/mine.profile" ibv_devinfo -v 2>&1)
check "a profile file: its own max_qp_wr" shows "$mine" max_qp_wr 256
check "a profile file: the rest from its base (rxe)" shows "$mine" max_cqe 32767
check "a profile file: its max_sge" shows "$mine" max_sge 4

# A profile with fewer QPs than perftest asks for: it cannot make them.
printf 'base = softverbs\nname = tiny\nmax_qp = 2\n' >"$work/tiny.profile"
tiny=$(SOFTVERBS_PROFILE="$work/tiny.profile" ibv_devinfo -v 2>&1)
check "a profile file: max_qp 2" shows "$tiny" max_qp 2

check "cx6: vendor_part_id 4123, Mellanox's vendor id" eval 'shows "$cx6" vendor_part_id 4123 && shows "$cx6" vendor_id 0x02c9'
check "cx6: its firmware" shows "$cx6" fw_ver 20.29.1016
check "cx6: max_sge 30" shows "$cx6" max_sge 30
check "cx6: 4X HDR (50 Gb/s a lane)" shows "$cx6" active_speed "50.0 Gbps"

# The port's rate follows the link under it, as rxe's and siw's do (the
# kernel's ib_get_eth_speed): a veth, 10 Gb/s, is 1X FDR10. A ConnectX, or a
# profile file that sets the rate, keeps its own. Where the link's speed is
# unknown (this host's virtio NIC, or only loopback): softverbs' 4X EDR.
own=$(ibv_devinfo -v 2>&1)
if [[ $(cat /sys/class/net/*/speed 2>/dev/null | grep -v -- -1) == "" ]]; then
  check "softverbs' own, no link of a known speed here: 4X EDR (25 Gb/s a lane)" \
    eval 'shows "$own" active_width 4X && shows "$own" active_speed "25.0 Gbps"'
fi
ns=svrate$$
if ip netns add "$ns" 2>/dev/null; then
  ip -n "$ns" link add v0 type veth peer name v1 && ip -n "$ns" addr add 10.96.0.1/24 dev v0 &&
    ip -n "$ns" link set v0 up && ip -n "$ns" link set v1 up
  printf 'base = rxe\nname = fixed-rate\nactive_width = 2\nactive_speed = 16\n' >"$work/fixed.profile"
  in_ns() { ip netns exec "$ns" env "$@" ibv_devinfo -v 2>&1; }
  veth=$(in_ns) veth_rxe=$(in_ns SOFTVERBS_PROFILE=rxe)
  veth_cx6=$(in_ns SOFTVERBS_PROFILE=cx6) veth_fixed=$(in_ns SOFTVERBS_PROFILE="$work/fixed.profile")
  ip netns del "$ns"
  check "on a 10 Gb/s veth: 1X FDR10, as rxe there" eval 'shows "$veth" active_width 1X && shows "$veth" active_speed "10.0 Gbps"'
  check "on a 10 Gb/s veth, as rxe: 1X FDR10" eval 'shows "$veth_rxe" active_width 1X && shows "$veth_rxe" active_speed "10.0 Gbps"'
  check "on a 10 Gb/s veth, as a ConnectX-6: its 4X HDR" eval 'shows "$veth_cx6" active_width 4X && shows "$veth_cx6" active_speed "50.0 Gbps"'
  check "on a 10 Gb/s veth, a profile file's rate (4X FDR)" eval 'shows "$veth_fixed" active_width 4X && shows "$veth_fixed" active_speed "14.0 Gbps"'
else
  echo "(no network namespace here: the link rate checks are skipped)"
fi

none=$(SOFTVERBS_PROFILE=no-such-nic ibv_devinfo 2>&1)
check "an unknown profile: no device listed" grep -q "No IB devices found" <<<"$none"
check "an unknown profile: says why" grep -q "SOFTVERBS_PROFILE=no-such-nic: no such profile" <<<"$none"

gid=$("$here/../common/loopback_gid.sh") || { echo "FAIL: no GID for 127.0.0.1"; exit 1; }
port=$((16800 + RANDOM % 200))  # (a range no fixed-port test uses)
# as_profile PROFILE OUT TOOL ARGS...: server and client of TOOL under PROFILE
as_profile() { tool_pair "$2" "SOFTVERBS_PROFILE=$1" "SOFTVERBS_PROFILE=$1" "${@:3}"; }
as_profile softverbs "$work/atomic_own" ib_atomic_lat -n 200 -x "$gid"
check "softverbs' own: ib_atomic_lat runs" test $? = 0
as_profile siw "$work/atomic_siw" ib_atomic_lat -n 200 -x "$gid"
rc=$?
check "siw: ib_atomic_lat fails" test $rc != 0
check "siw: at its first atomic post" grep -q "Couldn't post send" "$work/atomic_siw"
# perftest knows devices by vendor part: as a ConnectX-6 we get its inline
# sends; as softverbs' own, it turns them off.
as_profile cx6 "$work/inline_cx6" ib_write_lat -s 600 -I 600 -n 200 -x "$gid"
check "cx6: ib_write_lat runs" test $? = 0
check "cx6: perftest sends 600 bytes inline, as on a ConnectX" grep -q "Max inline data : 600\[B\]" "$work/inline_cx6"
as_profile softverbs "$work/inline_own" ib_write_lat -s 600 -I 600 -n 200 -x "$gid"
check "softverbs' own: perftest does not know it, and sends nothing inline" \
  grep -q "Device not recognized to implement inline feature" "$work/inline_own"
as_profile "$work/tiny.profile" "$work/tiny_qps" ib_write_bw -q 4 -n 10 -x "$gid"
check "max_qp 2: perftest's four QPs are refused" grep -q "Unable to create QP" "$work/tiny_qps"
check "max_qp 2: what ran out is said, once" test "$(grep -c "ibv_create_qp: ENOMEM: all 2 QPs are in use (the device's limit: max_qp" "$work/tiny_qps")" = 1
for profile in rxe siw cx6; do
  as_profile "$profile" "$work/pingpong_$profile" ibv_rc_pingpong -g "$gid" -n 100
  check "$profile: ibv_rc_pingpong runs" test $? = 0
done
((fail)) && for f in "$work"/*; do echo "== $f"; tail -n 5 "$f"; done
exit $fail
