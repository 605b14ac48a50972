#!/usr/bin/env bash
# The one-time root set-up: `softverbs-run --install` creates
# /dev/infiniband/uverbs0 and rdma_cm (character devices anyone may open)
# for every process, after which LD_LIBRARY_PATH alone is enough for UCX
# (`ucx_info -d` lists rc_verbs, ud_verbs, rdmacm), and --uninstall removes
# them. Run in a mount namespace of the test's own, over a private /dev and
# /etc/tmpfiles.d, so the machine's are never touched (checked).
set -u
run=${SOFTVERBS_RUN:?the softverbs-run launcher}
lib=$(dirname "$(dirname "$run")")/lib
((EUID == 0)) || { echo "needs root"; exit 77; }
command -v ucx_info >/dev/null || { echo "ucx_info not installed"; exit 77; }
[[ -e /dev/infiniband ]] && { echo "this host has /dev/infiniband already"; exit 77; }
unshare --mount --propagation private bash -s "$run" "$lib" <<'INNER'
set -u
run=$1 lib=$2
fail=0
check() { if "${@:2}"; then echo "ok:   $1"; else echo "FAIL: $1"; fail=1; fi; }
# A private /dev: a few devices, and the machine's /dev/shm (softverbs' registry).
dev=$(mktemp -d)
mount -t tmpfs softverbs-test "$dev" || exit 1
for node in "null c 1 3" "zero c 1 5" "urandom c 1 9" "random c 1 8"; do
  set -- $node
  mknod -m 666 "$dev/$1" "$2" "$3" "$4"
done
mkdir "$dev/shm" && mount --bind /dev/shm "$dev/shm"
mount --move "$dev" /dev || { echo "cannot move the private /dev into place"; exit 1; }
[[ -d /etc/tmpfiles.d ]] && mount -t tmpfs softverbs-test /etc/tmpfiles.d
# Where the host refuses namespaces to a plain user (a chroot here; AppArmor
# on Ubuntu 24.04, containers), softverbs-run says what to do, and after
# --install it runs the command anyway: the nodes are there and the library
# reports its sysfs view. (A copy of the launcher and libraries the user can
# read: CI's build tree is under /root.)
copy=$(mktemp -d) jail=$(mktemp -d)
mkdir "$copy/bin" "$copy/lib" && cp "$run" "$copy/bin/" && cp -a "$lib"/lib*.so* "$copy/lib/" && chmod -R a+rX "$copy"
mount --rbind / "$jail" || exit 1
as_nobody_jailed() { chroot --userspec=nobody:nogroup "$jail" env -i PATH=/usr/bin:/bin HOME=/ "$@"; }
refused=$(as_nobody_jailed "$copy/bin/softverbs-run" true 2>&1)
check "chrooted, before --install: softverbs-run refuses and names --install" grep -q -- "--install" <<<"$refused"
"$run" --install || { echo "FAIL: softverbs-run --install"; exit 1; }
ucx=$(as_nobody_jailed "$copy/bin/softverbs-run" ucx_info -d 2>&1)
check "chrooted, after --install: softverbs-run ucx_info -d lists rc_verbs" grep -qzE "Transport: rc_verbs[[:space:]]+#[[:space:]]+Device: softverbs0:1" <<<"$ucx"
umount -l "$jail" && rmdir "$jail"  # (rmdir only: never a recursive delete near a bind of /)
rm -rf "$copy"
check "/dev/infiniband/uverbs0 is a character device" test -c /dev/infiniband/uverbs0
check "/dev/infiniband/rdma_cm is a character device" test -c /dev/infiniband/rdma_cm
check "mode 0666" test "$(stat -c %a /dev/infiniband/uverbs0)" = 666
[[ -d /etc/tmpfiles.d ]] && check "tmpfiles.d entry" grep -q "c /dev/infiniband/uverbs0 0666" /etc/tmpfiles.d/softverbs.conf
ucx=$(LD_LIBRARY_PATH=$lib ucx_info -d 2>&1)
check "LD_LIBRARY_PATH alone: ucx_info -d lists rc_verbs" grep -qzE "Transport: rc_verbs[[:space:]]+#[[:space:]]+Device: softverbs0:1" <<<"$ucx"
check "and ud_verbs" grep -qzE "Transport: ud_verbs[[:space:]]+#[[:space:]]+Device: softverbs0:1" <<<"$ucx"
check "and the rdmacm connection manager" grep -q "Connection manager: rdmacm" <<<"$ucx"
"$run" --uninstall >/dev/null
check "--uninstall removes them" test ! -e /dev/infiniband
exit $fail
INNER
rc=$?
[[ -e /dev/infiniband ]] && { echo "FAIL: the machine's /dev was changed"; exit 1; }
exit $rc
