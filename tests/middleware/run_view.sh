#!/usr/bin/env bash
# What middleware sees of the device besides the verbs API, the way a new
# user gets it (README): `softverbs-run COMMAND`, as root and as a plain
# user (created here, deleted on exit), with no /dev/infiniband and no RDMA
# sysfs on the host.
#   run_view.sh root|user
# Checks, under softverbs-run: /dev/infiniband/uverbs0 is a character
# device the user may open read-write (UCX offers no device without it);
# /sys/class/infiniband/<dev> agrees with ibv_devinfo (node GUID, port
# state, each GID with its type "RoCE v2" and network device); the rest of
# /dev and /sys is still there; `ucx_info -d` lists rc_verbs and ud_verbs on
# softverbs0:1 and the rdmacm connection manager. Without the launcher,
# ibv_get_sysfs_path() (rdma-core's prototype: no arguments) names a
# directory with class/infiniband/<dev> (Open MPI checks it).
set -u
who=$1
here=$(cd "$(dirname "$0")" && pwd)
run=${SOFTVERBS_RUN:?the softverbs-run launcher}
lib=$(dirname "$(dirname "$run")")/lib
[[ -e /dev/infiniband/uverbs0 ]] && { echo "this host has /dev/infiniband/uverbs0 already: nothing to show"; exit 77; }
command -v ucx_info >/dev/null || { echo "ucx_info not installed"; exit 77; }

work=$(mktemp -d)
user=""
cleanup() {
  if [[ -n $user ]]; then
    uid=$(id -u "$user")
    userdel "$user" >/dev/null 2>&1
    rm -rf /dev/shm/softverbs-uid"$uid" /dev/shm/softverbs-uid"$uid".*  # its registry, counters and sysfs view
  fi
  rm -rf "$work"
}
trap cleanup EXIT
as=()
checks=$here/view_checks.sh
if [[ $who == user ]]; then
  ((EUID == 0)) || { echo "needs root to create a user"; exit 77; }
  user=svrun$$
  useradd -M -d "$work" -s /bin/sh "$user" || { echo "useradd failed"; exit 77; }
  # A copy the user can read wherever the build tree lives (CI's is under /root).
  mkdir -p "$work/bin" "$work/lib"
  cp "$run" "$work/bin/" && cp -a "$lib"/lib*.so* "$work/lib/" && cp "$here/view_checks.sh" "$work/"
  chmod -R a+rX "$work"
  run=$work/bin/softverbs-run lib=$work/lib checks=$work/view_checks.sh
  as=(setpriv --reuid="$user" --regid="$user" --clear-groups --reset-env env HOME="$work")
  if ! "${as[@]}" unshare --user true 2>/dev/null; then
    echo "this host refuses user namespaces to plain users (disabled, AppArmor, a chroot): softverbs-run"
    echo "needs root's --install here (docs/ci.md); mw_device_install tests that route"
    exit 77
  fi
fi

fail=0
echo "--- under softverbs-run, as $(${as[@]+"${as[@]}"} id -un)"
${as[@]+"${as[@]}"} "$run" bash "$checks" inside || fail=1
echo "--- without it: LD_LIBRARY_PATH=$lib"
${as[@]+"${as[@]}"} env LD_LIBRARY_PATH="$lib" bash "$checks" outside || fail=1
[[ -e /dev/infiniband ]] && { echo "FAIL: softverbs-run changed the host's /dev"; fail=1; }
exit $fail
