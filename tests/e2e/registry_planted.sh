#!/usr/bin/env bash
# Another user cannot deny us the device by planting names in /dev/shm.
# A user made here (the victim, deleted on exit) runs ibv_rc_pingpong
# between two of its processes after user nobody (the attacker) planted
# what the victim's state would be named: the old registry file
# /dev/shm/softverbs-uid<N>.v<layout> (mode 0666; before, ibv_open_device
# failed with EACCES and the victim could not remove it) and the state
# directory /dev/shm/softverbs-uid<N> (as a file, a 0777 directory, a
# link). The victim's state goes to a directory only it can write,
# $XDG_RUNTIME_DIR/softverbs, else ~/.softverbs-runtime/<host>, with a
# warning naming the planter; with neither, the verb fails with a clear
# error naming SOFTVERBS_RUNTIME_DIR, which then works.
#   registry_planted.sh
set -u
. "$(dirname "$0")/as_nobody.sh"
source "$(dirname "$0")/../common/tcp_port.sh"
need_nobody || exit
lib=${LD_LIBRARY_PATH%%:*}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
user=svplant$$
cleanup() {
  [[ -n ${srv:-} ]] && kill $srv 2>/dev/null
  if id "$user" >/dev/null 2>&1; then
    rm -rf /dev/shm/softverbs-uid"$uid" /dev/shm/softverbs-uid"$uid".*
    userdel "$user" >/dev/null 2>&1
  fi
  rm -rf "$work"
}
trap cleanup EXIT
useradd -M -d "$work/home" -s /bin/sh "$user" || { echo "useradd failed"; exit 77; }
uid=$(id -u "$user")
mkdir -p "$work/home" "$work/lib" "$work/xdg"
cp -a "$lib"/lib*.so* "$work/lib/"
chown "$user:" "$work/home" "$work/xdg" && chmod 700 "$work/xdg"
chmod 755 "$work" && chmod -R a+rX "$work/lib"
gid=$("$here/../common/loopback_gid.sh") || { echo "no ::ffff:127.0.0.1 GID"; exit 1; }
# (LD_PRELOAD and the sanitizer options pass through: the CI's ASan job preloads its runtime.)
keep=()
for v in LD_PRELOAD ASAN_OPTIONS UBSAN_OPTIONS; do [[ -n ${!v:-} ]] && keep+=("$v=${!v}"); done
as_victim() {
  setpriv --reuid="$user" --regid="$user" --clear-groups --reset-env \
    env HOME="$work/home" LD_LIBRARY_PATH="$work/lib" ${keep[@]+"${keep[@]}"} "$@"
}
pair() {  # pair PORT [ENV...]: ibv_rc_pingpong between two victim processes; 0 when both finish
  local port=$1
  shift
  as_victim env "$@" timeout 30 ibv_rc_pingpong -g "$gid" -p "$port" -n 100 >"$work/srv" 2>&1 &
  srv=$!
  # Until the server listens (0.3 s of sleep was too short for it under
  # load: "Couldn't connect", once in a full run).
  wait_tcp_port "$port" 10 "$srv"
  as_victim env "$@" timeout 25 ibv_rc_pingpong -g "$gid" -p "$port" -n 100 127.0.0.1 >"$work/cli" 2>&1
  local crc=$?
  wait $srv; local src=$?
  srv=
  ((src == 0 && crc == 0)) && grep -q "100 iters" "$work/cli"
}
fail=0
plant() {  # plant KIND: as nobody, what the victim's state would be named
  rm -rf /dev/shm/softverbs-uid"$uid" /dev/shm/softverbs-uid"$uid".* "$work/home/.softverbs-runtime" "$work/xdg/softverbs"
  "${as_nobody[@]}" sh -c "umask 0; : > /dev/shm/softverbs-uid$uid.v6"
  case $1 in
    file) "${as_nobody[@]}" sh -c "umask 0; : > /dev/shm/softverbs-uid$uid" ;;
    dir) "${as_nobody[@]}" sh -c "umask 0; mkdir /dev/shm/softverbs-uid$uid" ;;
    link) "${as_nobody[@]}" ln -s /tmp /dev/shm/softverbs-uid"$uid" ;;
  esac
}
port=18700
for kind in file dir link; do
  plant $kind
  port=$((port + 1))
  if pair $port && grep -q "belongs to uid $(id -u nobody)" "$work/srv" && compgen -G "$work/home/.softverbs-runtime/$(hostname)/registry.v*" >/dev/null; then
    echo "ok: planted $kind: the pair ran with its state under ~/.softverbs-runtime, and said why"
  else
    echo "FAIL: planted $kind"; cat "$work/srv" "$work/cli"; ls -la /dev/shm "$work/home"; fail=1
  fi
  port=$((port + 1))
  if pair $port XDG_RUNTIME_DIR="$work/xdg" && compgen -G "$work/xdg/softverbs/registry.v*" >/dev/null; then
    echo "ok: planted $kind: with XDG_RUNTIME_DIR the state is there"
  else
    echo "FAIL: planted $kind, XDG_RUNTIME_DIR"; cat "$work/srv" "$work/cli"; fail=1
  fi
done
plant dir
out=$(as_victim env HOME=/nonexistent ibv_devinfo 2>&1); rc=$?
if ((rc != 0)) && grep -q "SOFTVERBS_RUNTIME_DIR" <<<"$out"; then
  echo "ok: with no place of its own the verb fails and says what to set"
else
  echo "FAIL: no place of its own: exit $rc"; echo "$out"; fail=1
fi
port=$((port + 1))
if pair $port HOME=/nonexistent SOFTVERBS_RUNTIME_DIR="$work/xdg/chosen"; then
  echo "ok: SOFTVERBS_RUNTIME_DIR works"
else
  echo "FAIL: SOFTVERBS_RUNTIME_DIR"; cat "$work/srv" "$work/cli"; fail=1
fi
# Nothing planted: the usual place, mode 0700.
rm -rf /dev/shm/softverbs-uid"$uid" /dev/shm/softverbs-uid"$uid".*
port=$((port + 1))
if pair $port && [[ $(stat -c '%a %U' /dev/shm/softverbs-uid"$uid") == "700 $user" ]]; then
  echo "ok: nothing planted: /dev/shm/softverbs-uid$uid, 0700, the victim's"
else
  echo "FAIL: the usual place"; ls -la /dev/shm; fail=1
fi
exit $fail
