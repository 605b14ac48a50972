#!/usr/bin/env bash
# The checks of run_view.sh, run as the user under test.
#   view_checks.sh inside    (under softverbs-run)
#   view_checks.sh outside   (LD_LIBRARY_PATH only)
set -u
fail=0
check() {  # check DESCRIPTION COMMAND...: one line, PASS or FAIL
  if "${@:2}"; then echo "ok:   $1"; else echo "FAIL: $1"; fail=1; fi
}
dev=softverbs0
info=$(ibv_devinfo -v -d "$dev") || { echo "FAIL: ibv_devinfo"; exit 1; }
guid=$(sed -n 's/^[[:space:]]*node_guid:[[:space:]]*//p' <<<"$info")

sysfs_path() {  # rdma-core's `const char *ibv_get_sysfs_path(void)`
  python3 -c 'import ctypes; f = ctypes.CDLL("libibverbs.so.1").ibv_get_sysfs_path
f.restype = ctypes.c_char_p; f.argtypes = []; print(f().decode())'
}

if [[ $1 == outside ]]; then
  root=$(sysfs_path)
  echo "ibv_get_sysfs_path() = $root"
  check "it holds class/infiniband/$dev" test -d "$root/class/infiniband/$dev"
  check "node_guid there is ibv_devinfo's ($guid)" grep -qx "$guid" "$root/class/infiniband/$dev/node_guid"
  check "class/net is reachable through it" test -d "$root/class/net/lo"
  exit $fail
fi

d=/sys/class/infiniband/$dev
check "/dev/infiniband/uverbs0 is a character device" test -c /dev/infiniband/uverbs0
check "which $(id -un) may open read-write" test -r /dev/infiniband/uverbs0 -a -w /dev/infiniband/uverbs0
check "/dev/null still works" sh -c 'echo x >/dev/null'
check "/dev/shm is the host's" test -d /dev/shm
check "ibv_get_sysfs_path() is /sys" test "$(sysfs_path)" = /sys
check "$d/node_guid is ibv_devinfo's ($guid)" grep -qx "$guid" "$d/node_guid"
check "$d/node_type" grep -qx "1: CA" "$d/node_type"
check "port 1 ACTIVE" grep -qx "4: ACTIVE" "$d/ports/1/state"
check "port 1 link layer Ethernet" grep -qx "Ethernet" "$d/ports/1/link_layer"
check "/sys/class/infiniband_verbs/uverbs0/ibdev" grep -qx "$dev" /sys/class/infiniband_verbs/uverbs0/ibdev
check "/sys/class/net is still there" test -e /sys/class/net/lo
# Every GID ibv_devinfo lists: same address, type RoCE v2, its netdev.
while read -r index gid; do
  want=$(python3 -c 'import ipaddress, sys
b = ipaddress.IPv6Address(sys.argv[1]).packed
print(":".join(b[i:i + 2].hex() for i in range(0, 16, 2)))' "$gid")
  check "gids/$index = $gid" grep -qx "$want" "$d/ports/1/gids/$index"
  check "gid_attrs/types/$index = RoCE v2" grep -qx "RoCE v2" "$d/ports/1/gid_attrs/types/$index"
  ndev=$(cat "$d/ports/1/gid_attrs/ndevs/$index" 2>/dev/null)
  check "gid_attrs/ndevs/$index ($ndev) has that address" sh -c "ip -o addr show dev '$ndev' | grep -q ' ${gid#::ffff:}/'"
  # The device's own interfaces are under device/net; the loopback is not
  # (unless it is the only one), as no NIC's PCI device has lo.
  if [ "$ndev" = lo ] && [ "$(ls "$d/device/net")" != lo ]; then
    check "device/net has no lo beside the device's own interfaces" test ! -e "$d/device/net/lo"
  else
    check "device/net/$ndev" test -e "$d/device/net/$ndev"
  fi
done < <(sed -nE 's/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]+([^,]+),.*/\1 \2/p' <<<"$info")
ucx=$(ucx_info -d 2>&1)
check "ucx_info -d: rc_verbs on $dev:1" grep -qzE "Transport: rc_verbs[[:space:]]+#[[:space:]]+Device: $dev:1" <<<"$ucx"
check "ucx_info -d: ud_verbs on $dev:1" grep -qzE "Transport: ud_verbs[[:space:]]+#[[:space:]]+Device: $dev:1" <<<"$ucx"
check "ucx_info -d: Connection manager: rdmacm" grep -q "Connection manager: rdmacm" <<<"$ucx"
exit $fail
