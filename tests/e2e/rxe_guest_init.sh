#!/bin/sh
# /init of the rxe guest (busybox sh; built into the initramfs by rxe_guest.sh).
# Loads the modules listed in /modules/order, brings eth0 up with sv_ip,
# adds the soft-RoCE device rxe0 on it, runs the steps of sv_plan with
# Debian's pingpong tools and rping (through Debian's own libibverbs and the
# rxe provider), one after another, and powers off: one boot for all.
# Its parameters come from the kernel command line:
#   sv_ip=10.94.0.2  sv_peer=10.94.0.1  sv_gid=auto|N  sv_timeout=60
#   sv_plan=ROLE/TOOL/ARGS+ROLE/TOOL/ARGS+...   (ROLE server|client; commas
#     stand for spaces in ARGS; step k, from 1, uses TCP port 18515+k)
# Lines for the host start with "SV-RXE:". A client step waits for the
# host's "GO k" on the console (its server is up); a server step says
# "LISTENING k" once it listens. Each step ends with
#   SV-RXE: STEP k RESULT exit=<status of the tool>
# and the last line is SV-RXE: RESULT exit=<0, or the last failing status>.
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
  say "RESULT exit=$1"
  sync
  poweroff -f
  sleep 2
  reboot -f
}
trap 'finish 99' INT TERM

sv_ip="" sv_peer="" sv_gid=auto sv_plan="" sv_timeout=60
for w in $(cat /proc/cmdline); do
  case $w in
    sv_ip=* | sv_peer=* | sv_gid=* | sv_plan=* | sv_timeout=*)
      eval "${w%%=*}=\"\${w#*=}\"" ;;
  esac
done
say "booted in $(cut -d' ' -f1 /proc/uptime) s: ip=$sv_ip peer=$sv_peer plan=$sv_plan"

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

run_step() {  # K ROLE TOOL ARGS: one step of the plan; its tool's status
  k=$1 role=$2 tool=$3 args=$(echo "$4" | tr , ' ')
  port=$((18515 + k))
  say "STEP $k BEGIN role=$role tool=$tool args=$args"
  if [ "$role" = client ]; then
    say "WAITING $k"
    while read -r line; do
      case $line in *"GO $k"*) break ;; esac
    done
  fi
  if [ "$tool" = rping ]; then
    # rdma_cm through the kernel's IB CM: no GID or device option.
    if [ "$role" = server ]; then
      timeout "$sv_timeout" rping -s -a "$sv_ip" -p "$port" $args &
      pid=$!
      sleep 1  # rping listens at once; it has no port to watch for
      say "LISTENING $k"
      wait $pid
      return $?
    fi
    timeout "$sv_timeout" rping -c -a "$sv_peer" -p "$port" $args
    return $?
  fi
  if [ "$role" = server ]; then
    timeout "$sv_timeout" "$tool" -d rxe0 -g "$gid" -p "$port" $args &
    pid=$!
    i=0
    until netstat -ltn 2>/dev/null | grep -q ":$port "; do
      i=$((i + 1))
      kill -0 $pid 2>/dev/null || break
      [ $i -gt 600 ] && break
      sleep 0.1
    done
    say "LISTENING $k"
    wait $pid
    return $?
  fi
  timeout "$sv_timeout" "$tool" -d rxe0 -g "$gid" -p "$port" $args "$sv_peer"
}

overall=0
k=0
for step in $(echo "$sv_plan" | tr + ' '); do
  k=$((k + 1))
  role=${step%%/*} rest=${step#*/}
  tool=${rest%%/*} args=${rest#*/}
  [ "$args" = "$rest" ] && args=""
  run_step $k "$role" "$tool" "$args"
  status=$?
  say "STEP $k RESULT exit=$status at $(cut -d' ' -f1 /proc/uptime) s"
  [ $status = 0 ] || overall=$status
done
# rxe's counters (those not zero): packets, duplicates, sequence errors, retries...
rdma statistic show link rxe0/1 2>/dev/null |
  awk '{ for (i = 3; i < NF; i += 2) if ($(i + 1) != 0) printf "SV-RXE: counter %s %s\n", $i, $(i + 1) }'
dmesg | grep -iE "rxe|infiniband|rdma" | grep -vE "rxe added|dma_mask" | tail -20 | sed 's/^/SV-RXE: dmesg /'
finish $overall
