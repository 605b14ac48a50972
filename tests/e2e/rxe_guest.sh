#!/usr/bin/env bash
# Builds (once; cached) a small qemu guest that runs the Linux soft-RoCE
# driver (rxe) as an interop peer for softverbs (rxe_interop.sh), following
# /work/shared/brief/wire.md section 3:
#   - kernel and modules from Debian's linux-image-6.1.0-*-amd64 (the one apt
#     offers; apt-get download + dpkg -x, nothing installed on the host);
#   - an initramfs with busybox-static, the modules crc32_generic, udp_tunnel,
#     ip6_udp_tunnel, ib_core, ib_uverbs, rdma_rxe, e1000 (and whatever
#     `modinfo -F depends` adds, loaded first), rxe_guest_init.sh as /init, and
#     from this host with their shared libraries: Debian's ibv_rc_pingpong,
#     ibv_ud_pingpong, ibv_devinfo, /usr/bin/rdma, the rxe provider and
#     Debian's real libibverbs.so.1 (never softverbs': LD_LIBRARY_PATH and
#     LD_PRELOAD are ignored, and the copy is checked).
# Prints two lines: the kernel image and the initramfs.
# Cache: $SOFTVERBS_RXE_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/softverbs-rxe;
# one directory per kernel package version, one initramfs per content hash
# (this script, the init, the host's tools). $SOFTVERBS_RXE_KERNEL_PKG picks
# another kernel package (default: what linux-image-amd64 depends on).
# Exit 77 when something the guest needs is not available here (busybox-static,
# ibverbs-utils, ibverbs-providers, Debian's archive), 1 on any other failure.
set -euo pipefail
unset LD_LIBRARY_PATH LD_PRELOAD
here=$(cd "$(dirname "$0")" && pwd)
init_script=$here/rxe_guest_init.sh
cache=${SOFTVERBS_RXE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/softverbs-rxe}
# (rdma_ucm and its dependencies, ib_cm and rdma_cm: the kernel's connection
# manager, for rping.)
modules=(crc32_generic udp_tunnel ip6_udp_tunnel ib_core ib_uverbs rdma_rxe e1000 rdma_ucm)
tools=(/usr/bin/ibv_rc_pingpong /usr/bin/ibv_ud_pingpong /usr/bin/ibv_devinfo /usr/bin/rdma /usr/bin/rping)
multiarch=x86_64-linux-gnu
libibverbs=/usr/lib/$multiarch/libibverbs.so.1
provider=/usr/lib/$multiarch/libibverbs/librxe-rdmav34.so
driver_file=/etc/libibverbs.d/rxe.driver

log() { echo "rxe_guest: $*" >&2; }
skip() { log "$*"; exit 77; }

busybox=$(command -v busybox || true)
[[ -n $busybox ]] && ! ldd "$busybox" >/dev/null 2>&1 || skip "busybox-static is not installed"
for f in "${tools[@]}" "$libibverbs" "$provider" "$driver_file"; do
  [[ -e $f ]] || skip "$f is missing (ibverbs-utils, ibverbs-providers, iproute2)"
done
for c in apt-get apt-cache dpkg modinfo cpio gzip flock; do
  command -v "$c" >/dev/null || skip "$c is not installed"
done
# Debian's libibverbs, not softverbs' (which a build may have put anywhere on the path).
dpkg -S "$(readlink -f "$libibverbs")" 2>/dev/null | grep -q '^libibverbs1:' ||
  { log "$libibverbs is not Debian's libibverbs1"; exit 1; }
! grep -qa softverbs "$(readlink -f "$libibverbs")" || { log "$libibverbs is softverbs'"; exit 1; }

# The kernel package: the 6.1 image linux-image-amd64 depends on, else the newest offered.
pkg=${SOFTVERBS_RXE_KERNEL_PKG:-}
if [[ -z $pkg ]]; then
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
        sed -nE 's/^[[:space:]]*Depends: (linux-image-6\.1\.0-[0-9]+-amd64)$/\1/p' | head -1)
fi
if [[ -z $pkg ]]; then
  pkg=$(apt-cache pkgnames linux-image-6.1.0- 2>/dev/null | grep -E '^linux-image-6\.1\.0-[0-9]+-amd64$' | sort -V | tail -1)
fi
[[ -n $pkg ]] || skip "apt offers no linux-image-6.1.0-*-amd64 (apt-get update?)"
version=$(apt-cache policy "$pkg" 2>/dev/null | sed -nE 's/^[[:space:]]*Candidate: (.*)$/\1/p')
if [[ -z $version || $version == "(none)" ]]; then
  [[ -n ${SOFTVERBS_RXE_KERNEL_PKG:-} ]] && { log "apt has no candidate for $pkg"; exit 1; }
  skip "apt has no candidate for $pkg"
fi
key="${pkg}_${version}"
kdir=$cache/$key
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9   # one builder at a time (ctest -j runs the cases in parallel)

missing_module() {  # a cache made before a module joined the list is rebuilt
  local m
  for m in "${modules[@]}"; do grep -qx "$m" "$kdir/modules/order" 2>/dev/null || return 0; done
  return 1
}
if [[ ! -s $kdir/vmlinuz ]] || missing_module; then
  log "fetching $pkg $version"
  tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  chmod 755 "$tmp"   # apt-get download as root drops to _apt when it can write here
  (cd "$tmp" && apt-get download -q "$pkg=$version" >&2) || skip "apt-get download $pkg=$version failed"
  dpkg -x "$tmp"/*.deb "$tmp/x"
  kver=${pkg#linux-image-}
  mdir=$tmp/x/lib/modules/$kver
  mkdir -p "$tmp/k/modules"
  cp "$tmp/x/boot/vmlinuz-$kver" "$tmp/k/vmlinuz"
  # Dependencies first (modinfo -F depends), then the modules in wire.md's order.
  declare -A seen=()
  order=()
  add_module() {
    local m=$1 f d
    [[ -n ${seen[$m]:-} ]] && return
    seen[$m]=1
    f=$(find "$mdir" -name "$m.ko" -o -name "${m//_/-}.ko" | head -1)
    [[ -n $f ]] || { log "module $m not in $pkg"; exit 1; }
    for d in $(modinfo -F depends "$f" | tr , ' '); do add_module "$d"; done
    cp "$f" "$tmp/k/modules/$m.ko"
    order+=("$m")
  }
  for m in "${modules[@]}"; do add_module "$m"; done
  printf '%s\n' "${order[@]}" >"$tmp/k/modules/order"
  echo "$kver" >"$tmp/k/kver"
  rm -rf "$kdir"
  mv "$tmp/k" "$kdir"
  rm -rf "$tmp"
  trap - EXIT
fi

# Everything the guest copies from this host, with its shared libraries.
files=("${tools[@]}" "$provider" "$libibverbs")
libs=()
for f in "${tools[@]}" "$provider"; do
  while read -r lib; do libs+=("$lib"); done < <(ldd "$f" | sed -nE 's/.*=> (\/[^ ]+) .*/\1/p; s/^[[:space:]]*(\/[^ ]+) .*/\1/p')
done
# glibc loads libgcc_s at pthread_exit/cancel time (rping's threads): ldd cannot see it.
libs+=("/usr/lib/$multiarch/libgcc_s.so.1")
mapfile -t libs < <(printf '%s\n' "${libs[@]}" | sort -u)
hash=$( { cat "$0" "$init_script" "$busybox" "$kdir/modules/order"
          for f in "${files[@]}" "${libs[@]}" "$driver_file"; do echo "$f"; cat "$f"; done; } | sha256sum | cut -c1-16)
initrd=$kdir/initramfs-$hash.gz
if [[ ! -s $initrd ]]; then
  log "building the initramfs ($hash)"
  root=$(mktemp -d "$cache/.root.XXXXXX")
  trap 'rm -rf "$root"' EXIT
  mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,lib/$multiarch/libibverbs,lib64,etc/libibverbs.d,proc,sys,dev,tmp,modules}
  ln -s ../lib "$root/usr/lib"   # /usr/lib/... and /lib/... are one directory, as with usrmerge
  cp "$busybox" "$root/bin/busybox"
  ln -s busybox "$root/bin/sh"
  cp "$init_script" "$root/init"
  chmod 755 "$root/init"
  for f in "${tools[@]}"; do cp -L "$f" "$root/usr/bin/"; done
  for f in "${libs[@]}" "$provider" "$libibverbs"; do cp -L "$f" "$root$f"; done
  cp "$driver_file" "$root/etc/libibverbs.d/"
  cp "$kdir"/modules/*.ko "$kdir/modules/order" "$root/modules/"
  # The guest's libibverbs must be Debian's (the host's softverbs build is never copied).
  cmp -s "$root$libibverbs" "$(readlink -f "$libibverbs")" || { log "libibverbs copy differs"; exit 1; }
  (cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -6) >"$initrd.tmp"
  mv "$initrd.tmp" "$initrd"
  rm -rf "$root"
  trap - EXIT
  # Older initramfs images of this kernel are stale.
  find "$kdir" -maxdepth 1 -name 'initramfs-*.gz' ! -name "initramfs-$hash.gz" -delete
  log "initramfs $(du -h "$initrd" | cut -f1): $(tr '\n' ' ' <"$kdir/modules/order")"
fi
echo "$kdir/vmlinuz"
echo "$initrd"
