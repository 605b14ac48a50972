#!/usr/bin/env bash
# The Debian package from build to purge, in a root of its own. The package
# is made from this build tree (cpack), installed with apt-get into an
# overlay of the machine's root in a private mount namespace (the machine's
# own files are never written: every change lands in the overlay's upper
# directory, a tmpfs), used by a plain user created there, with no
# LD_LIBRARY_PATH (softverbs-run ibv_devinfo, ibv_rc_pingpong between two
# processes, a UCX job), then purged: nothing of it may be left.
#   package_test.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/overlay_root.sh"
build=$1
((EUID == 0)) || { echo "needs root (mount namespaces, apt-get)"; exit 77; }
for tool in cpack dpkg-deb dpkg-shlibdeps apt-get unshare pivot_root runuser; do
  command -v $tool >/dev/null || { echo "$tool is not installed"; exit 77; }
done
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null ||
  { echo "no overlay filesystem in this kernel"; exit 77; }

work=$(mktemp -d /tmp/softverbs-package.XXXXXX)
user=svpkg$$
cleanup() { rm -rf "$work"; }  # (the user and its runtime directory lived in the overlay root only)
trap cleanup EXIT
fail=0
check() { if "${@:2}"; then echo "ok:   $1"; else echo "FAIL: $1"; fail=1; fi; }

probe_user=nobody
if ! setpriv --reuid="$probe_user" --regid=nogroup --clear-groups unshare --user true 2>/dev/null; then
  echo "this host refuses user namespaces to plain users (disabled, AppArmor, a chroot): the plain user's"
  echo "softverbs-run cannot be tried here (mw_device_install tests the --install route)"
  exit 77
fi

# --- The package, as the README makes it.
deb=$(the_package "$build" "$work/deb") || { echo "FAIL: cpack"; exit 1; }
echo "package: ${deb##*/} ($(du -k "$deb" | cut -f1) KiB)"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
contents=$(dpkg-deb -c "$deb" | awk '{print $6}')
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
libdir=/usr/lib/$multiarch/softverbs
for path in "$libdir/libibverbs.so.1" "$libdir/librdmacm.so.1" /usr/bin/softverbs-run /usr/bin/softverbs-stat \
            /usr/sbin/softverbs-hostd /usr/lib/systemd/system/softverbs-hostd.service \
            /usr/share/man/man1/softverbs-run.1.gz /usr/share/man/man1/softverbs-stat.1.gz \
            /usr/share/man/man8/softverbs-hostd.8.gz /usr/share/man/man7/softverbs.7.gz; do
  check "the package holds $path" grep -qx "\.$path" <<<"$contents"
done
check "no file outside /usr" test -z "$(grep -v '^\./usr/' <<<"$contents" | grep -v '^\./$')"
check "nothing in the system's library directories" test -z "$(grep -E "^\./usr/lib/$multiarch/[^/]+$" <<<"$contents")"
# What the runtime needs (dpkg-shlibdeps): the C++ runtime, ISA-L (CRC),
# libbpf (the service); never Debian's own verbs libraries, which ours stand in for.
for dep in libc6 libstdc++6 libisal2 libbpf1 liburing2; do check "Depends names $dep" grep -q "\b$dep\b" <<<"$depends"; done
check "Depends names neither libibverbs1 nor librdmacm1" test -z "$(grep -oE 'libibverbs1|librdmacm1' <<<"$depends")"

# --- A root of our own: the machine's root, with a tmpfs on top.
ovl=$work/ovl
mkdir -p "$ovl"
port=$((20000 + $$ % 10000))
unshare --mount --propagation private bash -s "$ovl" "$deb" "$user" "$libdir" "$port" "$here" >"$work/root.log" 2>&1 <<'INNER'
set -u
ovl=$1 deb=$2 user=$3 libdir=$4 port=$5 here=$6
source "$here/overlay_root.sh"
make_overlay_root "$ovl" || exit 1
# Each step in a mount namespace of its own whose root is the overlay; the
# upper directory stays in reach here, to see what the package left.
in_root() { in_root_of "$ovl" "$@"; }
in_root useradd -m "$user" || exit 1
(cd "$ovl/upper" && find . -mindepth 1 | sort) >"$ovl/before"
in_root bash -s "$deb" "$user" "$libdir" "$port" "$here" <<'STEPS'
set -u
deb=$1 user=$2 libdir=$3 port=$4 here=$5
source "$here/../common/tcp_port.sh"
fail=0
check() { if "${@:2}"; then echo "ok:   $1 (${SECONDS}s)"; else echo "FAIL: $1 (${SECONDS}s)"; fail=1; fi; }
export DEBIAN_FRONTEND=noninteractive
cd "$(dirname "$deb")"
apt-get install -y --no-install-recommends "./$(basename "$deb")" >/tmp/apt-install.log 2>&1
check "apt-get install ./$(basename "$deb")" test $? = 0 || tail -n 20 /tmp/apt-install.log
as_user() { runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="/home/$user" "$@"; }
devinfo=$(as_user softverbs-run ibv_devinfo -v 2>&1)
check "a plain user: softverbs-run ibv_devinfo shows softverbs0" grep -q "hca_id:.*softverbs0" <<<"$devinfo"
check "from the package's library directory" grep -q "^$libdir:\?" <<<"$(as_user softverbs-run printenv LD_LIBRARY_PATH)"
check "and no LD_LIBRARY_PATH of its own" test -z "$(as_user printenv LD_LIBRARY_PATH)"
gid=$(sed -nE 's/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]+::ffff:127\.0\.0\.1,.*/\1/p' <<<"$devinfo" | head -1)
check "a GID for 127.0.0.1" test -n "$gid"
as_user timeout 60 softverbs-run ibv_rc_pingpong -g "$gid" -p "$port" -n 200 -c >/tmp/server.out 2>&1 &
server=$!
wait_tcp_port "$port" 10 "$server"
as_user timeout 60 softverbs-run ibv_rc_pingpong -g "$gid" -p "$port" -n 200 -c 127.0.0.1 >/tmp/client.out 2>&1
client_rc=$?
wait "$server"; server_rc=$?
check "ibv_rc_pingpong between two processes of the user" test "$client_rc$server_rc" = 00
grep -h "iters in" /tmp/server.out /tmp/client.out || cat /tmp/server.out /tmp/client.out
if command -v ucx_perftest >/dev/null; then
  # UCX registers ~46 MiB per process, which counts against the memlock
  # limit as on a NIC; where even root's hard limit is lower (this machine:
  # 8 MiB, no CAP_SYS_RESOURCE) limits.conf cannot raise it: the knob.
  memlock=()
  [[ $(ulimit -Hl) == unlimited ]] || memlock=(SOFTVERBS_MEMLOCK=ignore)
  ucx=(env UCX_TLS=rc_verbs,ud_verbs,self UCX_NET_DEVICES=softverbs0:1 "${memlock[@]}"
       softverbs-run ucx_perftest -p $((port + 1)) -t tag_lat -n 1000)
  as_user timeout 60 "${ucx[@]}" >/tmp/ucx-server.out 2>&1 &
  server=$!
  wait_tcp_port $((port + 1)) 10 "$server"
  as_user timeout 60 "${ucx[@]}" 127.0.0.1 >/tmp/ucx-client.out 2>&1
  client_rc=$?
  wait "$server"; server_rc=$?
  check "a UCX job (ucx_perftest tag_lat over rc_verbs and ud_verbs)" test "$client_rc$server_rc" = 00
  grep -h "^Final:" /tmp/ucx-client.out || cat /tmp/ucx-server.out /tmp/ucx-client.out
else
  echo "FAIL: ucx_perftest is not installed (scripts/install-deps.sh installs it)"; fail=1
fi
apt-get purge -y softverbs >/tmp/apt-purge.log 2>&1
check "apt-get purge softverbs" test $? = 0 || tail -n 20 /tmp/apt-purge.log
check "dpkg no longer knows it" test -z "$(dpkg-query -W -f='${Status}' softverbs 2>/dev/null | grep -v not-installed)"
userdel -r "$user" 2>/dev/null
exit $fail
STEPS
steps=$?
(cd "$ovl/upper" && find . -mindepth 1 | sort) >"$ovl/after"
# What the package left: anything new in the overlay since the user was
# made, but dpkg's and apt's own records, caches and logs (man-db's index
# included), the user's passwd entries going, and /tmp.
# (A directory of the machine's root shows in the upper directory once
# anything was written into it: left alone, it is no trace of the package.)
comm -13 "$ovl/before" "$ovl/after" |
  grep -vE '^\./(var/lib/(dpkg|apt)|var/cache|var/log|tmp)(/|$)|^\./etc/(passwd|group|shadow|gshadow|subuid|subgid)-?$' |
  while read -r path; do [[ -d $ovl/upper/$path && -d /$path ]] || echo "$path"; done >"$ovl/left"
if [[ -s $ovl/left ]]; then
  echo "FAIL: purged, but left behind:"; cat "$ovl/left"; exit 1
fi
echo "ok:   purged, nothing left behind ($(wc -l <"$ovl/after") paths in the overlay, all dpkg's, apt's or the user's)"
exit $steps
INNER
root_rc=$?
cat "$work/root.log"
((root_rc == 0 && fail == 0))
