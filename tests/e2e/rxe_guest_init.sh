#!/bin/sh
# /init of the rxe guest (busybox sh; built into the initramfs by rxe_guest.sh).
# Loads the modules listed in /modules/order, brings eth0 up with sv_ip,
# adds the soft-RoCE device rxe0 on it, runs one of Debian's pingpong tools
# (through Debian's own libibverbs and the rxe provider) and powers off.
# Its parameters come from the kernel command line (commas stand for spaces in sv_args):
#   sv_role=server|client  sv_tool=ibv_rc_pingpong  sv_ip=10.94.0.2
#   sv_peer=10.94.0.1 (client)  sv_gid=auto|N  sv_args=-n,100,-c  sv_timeout=180
# Lines for the host start with "SV-RXE:"; the last one is
#   SV-RXE: RESULT exit=<status of the tool> role=... tool=...
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
export LD_LIBRARY_PATH=/lib/x86_64-linux-gnu
/bin/busybox mkdir -p /proc /sys /dev /tmp /bin /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1

say() { echo "SV-RXE: $*"; }
finish() {
  say "RESULT exit=$1 role=${sv_role:-?} tool=${sv_tool:-?}"
  sync
  poweroff -f
  sleep 2
  reboot -f
}
trap 'finish 99' INT TERM

sv_role="" sv_tool="" sv_ip="" sv_peer="" sv_gid=auto sv_args="" sv_timeout=180
for w in $(cat /proc/cmdline); do
  case $w in
    sv_role=* | sv_tool=* | sv_ip=* | sv_peer=* | sv_gid=* | sv_args=* | sv_timeout=*)
      eval "${w%%=*}=\"\${w#*=}\"" ;;
  esac
done
args=$(echo "$sv_args" | tr , ' ')
say "booted in $(cut -d' ' -f1 /proc/uptime) s: role=$sv_role tool=$sv_tool ip=$sv_ip peer=$sv_peer args=$args"

for m in $(cat /modules/order); do
  insmod "/modules/$m.ko" || { say "insmod $m failed"; finish 90; }
done

ip link set lo up
ip link set eth0 up || { say "no eth0"; finish 91; }
ip addr add "$sv_ip/24" dev eth0 || finish 91
rdma link add rxe0 type rxe netdev eth0 || { say "rdma link add failed"; dmesg | tail -20; finish 92; }
i=0
until ibv_devinfo -d rxe0 2>/dev/null | grep -q PORT_ACTIVE; do
  i=$((i + 1))
  [ $i -gt 300 ] && { say "rxe0 never became PORT_ACTIVE"; ibv_devinfo -v; dmesg | tail -20; finish 93; }
  sleep 0.1
done
say "rxe0 active at $(cut -d' ' -f1 /proc/uptime) s"
ibv_devinfo -v -d rxe0 | grep -E "active_mtu|GID\[|link_layer|fw_ver|node_guid" | sed 's/^/SV-RXE: devinfo /'

gid=$sv_gid
if [ "$gid" = auto ]; then
  gid=$(ibv_devinfo -v -d rxe0 | sed -nE "s/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]+::ffff:$(echo "$sv_ip" | sed 's/\./\\./g'),.*/\1/p" | head -1)
  [ -n "$gid" ] || { say "no GID for ::ffff:$sv_ip"; finish 94; }
fi
say "GID index $gid"

status=0
if [ "$sv_tool" = rping ]; then
  # rdma_cm through the kernel's IB CM: no GID or device option.
  if [ "$sv_role" = server ]; then
    timeout "$sv_timeout" rping -s -a "$sv_ip" $args &
    pid=$!
    sleep 1  # rping listens at once; it has no port to watch for
    say "LISTENING"
    wait $pid
    status=$?
  else
    timeout "$sv_timeout" rping -c -a "$sv_peer" $args
    status=$?
  fi
elif [ "$sv_role" = server ]; then
  timeout "$sv_timeout" "$sv_tool" -d rxe0 -g "$gid" $args &
  pid=$!
  i=0
  until netstat -ltn 2>/dev/null | grep -q ':18515 '; do
    i=$((i + 1))
    kill -0 $pid 2>/dev/null || break
    [ $i -gt 600 ] && break
    sleep 0.1
  done
  say "LISTENING"
  wait $pid
  status=$?
else
  timeout "$sv_timeout" "$sv_tool" -d rxe0 -g "$gid" $args "$sv_peer"
  status=$?
fi
say "tool exited $status at $(cut -d' ' -f1 /proc/uptime) s"
# rxe's counters (those not zero): packets, duplicates, sequence errors, retries...
rdma statistic show link rxe0/1 2>/dev/null |
  awk '{ for (i = 3; i < NF; i += 2) if ($(i + 1) != 0) printf "SV-RXE: counter %s %s\n", $i, $(i + 1) }'
dmesg | grep -iE "rxe|infiniband|rdma" | grep -vE "rxe added|dma_mask" | tail -20 | sed 's/^/SV-RXE: dmesg /'
finish $status
