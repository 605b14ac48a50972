# Sourced by the host service's tests (tests/e2e/hostd_*.sh): a host as a
# network namespace $n (10.98.N.1 on a veth), its service, and the users
# who play victims and attackers.
#   need_users || exit             root, with users nobody and daemon
#   make_host PREFIX || exit       namespace $n, address PREFIX.1; $gid: its GID index
#   start_service LOG [ARGS...]    softverbs-hostd ($hostd) in $n, stderr to LOG;
#                                  waits until it serves; $service_pid. With
#                                  $service_nofile set, under that file limit
#                                  (soft and hard)
#   as_nobody / as_daemon          command prefixes (after `ip netns exec $n`)
#   cpu_ticks PID                  user+system clock ticks the process used
#   make_service_hosts TAG PREFIX || exit
#                                  two hosts instead (two_hosts.sh): namespaces
#                                  $a, $b on a veth (PREFIX.1, PREFIX.2), their
#                                  GID indexes $ga, $gb, $out, $pids and the
#                                  trap that cleans up; TAG names them
# Otherwise the caller sets $n, $out (a 0777 directory) and a trap that kills
# "${pids[@]}", deletes $n and removes $out.
. "$(dirname "${BASH_SOURCE[0]}")/as_nobody.sh"
as_daemon=(setpriv --reuid=daemon --regid=daemon --clear-groups)

need_users() {
  need_nobody || return
  id daemon >/dev/null 2>&1 || { echo "no user daemon"; return 77; }
}

make_host() {
  local prefix=$1
  ip netns add "$n" || { echo "cannot create a network namespace: skipped"; return 77; }
  ip -n "$n" link set lo up && ip -n "$n" link add v0 type veth peer name v1 &&
    ip -n "$n" addr add "$prefix.1/24" dev v0 && ip -n "$n" link set v0 up && ip -n "$n" link set v1 up ||
    { echo "cannot set up the link"; return 1; }
  gid=$(ip netns exec "$n" ibv_devinfo -v | sed -nE "s/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]+::ffff:${prefix//./\\.}\.1,.*/\1/p" | head -1)
  [[ -n $gid ]] || { echo "no GID for $prefix.1"; return 1; }
}

start_service() {
  local log=$1
  shift
  local -a limit=()
  [[ -n ${service_nofile:-} ]] && limit=(prlimit "--nofile=$service_nofile:$service_nofile")
  ip netns exec "$n" "${limit[@]}" "$hostd" ${HOSTD_ARGS:-} "$@" 2>"$log" &
  service_pid=$!
  pids+=($service_pid)
  for _ in $(seq 100); do grep -q serving "$log" && return 0; sleep 0.05; done
  echo "the service did not start"
  cat "$log"
  return 1
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }

make_service_hosts() {
  local tag=$1 prefix=$2
  a=sv${tag}A$$ b=sv${tag}B$$ va=sv${tag}a$$ vb=sv${tag}b$$
  out=$(mktemp -d)
  chmod 777 "$out"
  pids=()
  cleanup() { kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; rm -rf "$out"; }
  trap cleanup EXIT
  . "$(dirname "${BASH_SOURCE[0]}")/two_hosts.sh"
  make_two_hosts "$prefix" || return
  ga=$(gid_of "$a" "::ffff:$prefix.1") gb=$(gid_of "$b" "::ffff:$prefix.2")
  [[ -n $ga && -n $gb ]] || { echo "no GID for the veth addresses"; return 1; }
}
