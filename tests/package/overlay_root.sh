# Sourced by the package tests: the Debian package made from a build tree,
# and roots of their own to install it into, so the machine's own files are
# never written.
#   build_package BUILD_DIR OUT_DIR     -> prints the .deb's path (cpack's log on failure)
#   the_package BUILD_DIR OUT_DIR       -> the same, or the .deb CTest's fixture built
#                                          (PACKAGE_DEB_DIR, tests/package/CMakeLists.txt)
#   make_overlay_root DIR               (in a private mount namespace, as root)
#   in_root_of DIR CMD...               CMD in that root (a mount namespace of its own)
#
# The root is the machine's root with a tmpfs on top (overlayfs: every change
# lands in DIR/upper), with /proc, /sys, and a /dev of its own (a tmpfs with
# the usual nodes and an empty /dev/shm): `softverbs-run --install` and the
# softverbs registry write there, not into the machine's /dev.

build_package() {
  cpack --config "$1/CPackConfig.cmake" -B "$2" >"$2.log" 2>&1 || { cat "$2.log" >&2; return 1; }
  local deb
  deb=$(ls "$2"/softverbs_*.deb 2>/dev/null | head -1)
  [[ -n $deb ]] || { cat "$2.log" >&2; echo "cpack made no softverbs_*.deb" >&2; return 1; }
  echo "$deb"
}

the_package() {
  local built
  built=$(ls "${PACKAGE_DEB_DIR:-/nonexistent}"/softverbs_*.deb 2>/dev/null | head -1)
  if [[ -n $built ]]; then echo "$built"; else build_package "$@"; fi
}

make_overlay_root() {
  local dir=$1 node
  mount -t tmpfs softverbs-package "$dir" && mkdir "$dir/upper" "$dir/work" "$dir/root" || return 1
  mount -t overlay overlay -o "lowerdir=/,upperdir=$dir/upper,workdir=$dir/work" "$dir/root" || return 1
  mount -t proc proc "$dir/root/proc" && mount --rbind /sys "$dir/root/sys" || return 1
  mount -t tmpfs softverbs-dev "$dir/root/dev" || return 1
  for node in "null c 1 3" "zero c 1 5" "full c 1 7" "random c 1 8" "urandom c 1 9" "tty c 5 0"; do
    set -- $node
    mknod -m 666 "$dir/root/dev/$1" "$2" "$3" "$4" || return 1
  done
  mkdir "$dir/root/dev/shm" "$dir/root/dev/pts" && mount -t tmpfs -o mode=1777 softverbs-shm "$dir/root/dev/shm" || return 1
  mount --bind /dev/pts "$dir/root/dev/pts" 2>/dev/null
  mkdir -p "$dir/root/.oldroot"
  # man-db re-indexes every manual page after each install and purge (its
  # dpkg trigger, seconds each); not what the tests are about.
  rm -f "$dir/root/var/lib/man-db/auto-update"
}

# pivot_root, not chroot: a chrooted process may not create the user
# namespace softverbs-run makes for a plain user.
in_root_of() {
  local dir=$1
  shift
  unshare --mount --propagation private bash -c 'cd "$1" && pivot_root . .oldroot && cd / && umount -l /.oldroot &&
    shift && exec "$@"' sh "$dir/root" "$@"
}
