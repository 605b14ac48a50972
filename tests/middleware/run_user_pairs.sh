#!/usr/bin/env bash
# Two processes of one plain user (created here, deleted on exit) reach each
# other through shared memory although a user namespace stands between
# them: each under a softverbs-run of its own (a user namespace each), and
# one under softverbs-run with the other on LD_LIBRARY_PATH alone, both
# ways. /proc/<pid>/fd is closed across user namespaces even to the same
# uid; each process lends its arena and doorbells instead
# (src/shm/fd_lender.h). Before it, these pairs ran out of retries.
# ibv_rc_pingpong -e (its completion channel: a peer rings our doorbell)
# and rping (the connection manager). None may fall back to RoCEv2: a
# process that started the network transport prints its counters at exit
# (SOFTVERBS_STAT_AT_EXIT), and none may.
#   run_user_pairs.sh      (SOFTVERBS_RUN: the launcher; needs root to add the user)
set -u
source "$(dirname "$0")/../common/tcp_port.sh"
here=$(cd "$(dirname "$0")" && pwd)
run=${SOFTVERBS_RUN:?the softverbs-run launcher}
lib=$(dirname "$(dirname "$run")")/lib
((EUID == 0)) || { echo "needs root to create a user"; exit 77; }
command -v ibv_rc_pingpong >/dev/null && command -v rping >/dev/null || { echo "ibverbs-utils or rdmacm-utils missing"; exit 77; }

work=$(mktemp -d)
user=svpair$$
cleanup() {
  local uid
  uid=$(id -u "$user" 2>/dev/null) && rm -rf /dev/shm/softverbs-uid"$uid" /dev/shm/softverbs-uid"$uid".*
  userdel "$user" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
useradd -M -d "$work" -s /bin/sh "$user" || { echo "useradd failed"; exit 77; }
# A copy the user can read wherever the build tree lives (CI's is under /root).
mkdir -p "$work/bin" "$work/lib"
cp "$run" "$work/bin/" && cp -a "$lib"/lib*.so* "$work/lib/" && chmod -R a+rX "$work"
run=$work/bin/softverbs-run lib=$work/lib
as=(setpriv --reuid="$user" --regid="$user" --clear-groups --reset-env env HOME="$work" SOFTVERBS_STAT_AT_EXIT=1)
if ! "${as[@]}" unshare --user true 2>/dev/null; then
  echo "this host refuses user namespaces to plain users (disabled, AppArmor, a chroot): no user namespace"
  echo "can stand between two processes here"
  exit 77
fi
launch() {  # run|plain COMMAND...: as the user, under softverbs-run or with LD_LIBRARY_PATH alone
  local how=$1
  shift
  if [[ $how == run ]]; then "${as[@]}" timeout 30 "$run" "$@"; else "${as[@]}" LD_LIBRARY_PATH="$lib" timeout 30 "$@"; fi
}
gid=$(launch plain ibv_devinfo -v | sed -nE 's/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]+::ffff:127\.0\.0\.1,.*/\1/p' | head -1)
[[ -n $gid ]] || { echo "FAIL: no GID for 127.0.0.1"; exit 1; }

port=$((21000 + $$ % 5000))
fail=0
pair() {  # SERVER_HOW CLIENT_HOW TOOL: the tool's server and client
  local server_how=$1 client_how=$2 tool=$3 server client server_rc client_rc ok=1
  port=$((port + 1))
  case $tool in
    ibv_rc_pingpong) server=(ibv_rc_pingpong -g "$gid" -p "$port" -n 200 -e -c) client=("${server[@]}" 127.0.0.1) ;;
    rping) server=(rping -s -a 127.0.0.1 -p "$port" -C 20 -v) client=(rping -c -a 127.0.0.1 -p "$port" -C 20 -v) ;;
  esac
  launch "$server_how" "${server[@]}" >"$work/server" 2>&1 &
  local pid=$!
  if [[ $tool == rping ]]; then wait_cm_port "$port" 5 "$pid"; else wait_tcp_port "$port" 5 "$pid"; fi
  launch "$client_how" "${client[@]}" >"$work/client" 2>&1
  client_rc=$?
  wait "$pid"
  server_rc=$?
  ((server_rc == 0 && client_rc == 0)) || ok=0
  [[ $tool == ibv_rc_pingpong ]] && ! grep -q "iters in" "$work/client" && ok=0
  [[ $tool == rping ]] && ! grep -q "ping data" "$work/client" && ok=0
  if grep -q "at exit" "$work/server" "$work/client"; then
    echo "    (the network transport was used: the pair did not reach each other's memory)"; ok=0
  fi
  if ((ok)); then
    echo "ok:   $tool, server $server_how, client $client_how"
  else
    echo "FAIL: $tool, server $server_how ($server_rc), client $client_how ($client_rc)"
    sed 's/^/    server: /' "$work/server" | tail -n 8
    sed 's/^/    client: /' "$work/client" | tail -n 8
    fail=1
  fi
}
pair run run ibv_rc_pingpong
pair plain run ibv_rc_pingpong
pair run plain ibv_rc_pingpong
pair run run rping
exit $fail
