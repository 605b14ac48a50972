#!/usr/bin/env bash
# Runs rdma-core's own test suite (tests/ of an rdma-core checkout, v44 to
# match Debian 12; Debian's python3-pyverbs) over softverbs, module by
# module, and prints a line per module. It is the conformance check nobody
# here wrote (issue 19 came from it). Root: it runs in a network namespace
# with one veth (peer in a second namespace), so the raw Ethernet frames of
# test_flow and test_rss_traffic stay there.
#   scripts/rdma_core_tests.sh RDMA_CORE_CHECKOUT [BUILD_DIR] [MODULE...]
# Needs: apt-get install python3-pyverbs (not installed by install-deps.sh:
# it pulls in rdma-core's udev and systemd pieces). Vendor modules (mlx5,
# efa, cuda) are left out. Logs: /tmp/rdma-core-tests/<module>.log
set -u
src=${1:?usage: $0 RDMA_CORE_CHECKOUT [BUILD_DIR] [MODULE...]}
build=${2:-$(dirname "$0")/../build}
shift $(($# >= 2 ? 2 : 1))
build=$(cd "$build" && pwd) || exit 1
[ -f "$src/tests/run_tests.py" ] || { echo "no tests/run_tests.py under $src"; exit 1; }
python3_sys=/usr/bin/python3  # Debian's, where python3-pyverbs lives
"$python3_sys" -c 'import pyverbs' 2>/dev/null || { echo "install python3-pyverbs first"; exit 1; }
out=/tmp/rdma-core-tests
mkdir -p "$out"
a=sv-rct-a-$$ b=sv-rct-b-$$
ip netns add "$a" && ip netns add "$b" || exit 1
trap 'ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null' EXIT
ip link add sv-rct netns "$a" type veth peer name sv-rct-peer netns "$b" || exit 1
ip -n "$a" link set lo up && ip -n "$a" link set sv-rct up && ip -n "$b" link set sv-rct-peer up
ip -n "$a" addr add 10.78.0.1/24 dev sv-rct
sleep 2  # IPv6 link-local addresses leave their tentative state
modules=("$@")
if [ ${#modules[@]} -eq 0 ]; then
  mapfile -t modules < <(cd "$src/tests" && ls test_*.py | sed 's/\.py$//' | grep -vE 'mlx5|efa|cuda')
fi
fail=0
for m in "${modules[@]}"; do
  (cd "$src" && ip netns exec "$a" env SOFTVERBS_NETDEV=sv-rct LD_LIBRARY_PATH="$build/lib" timeout 300 \
    "$build/bin/softverbs-run" "$python3_sys" tests/run_tests.py -v "tests.$m") >"$out/$m.log" 2>&1
  rc=$?
  printf '%-22s exit %3d  %3d ok  %3d failed  %3d skipped\n' "$m" $rc "$(grep -cE '\.\.\. ok$' "$out/$m.log")" \
    "$(grep -cE '\.\.\. (FAIL|ERROR)$' "$out/$m.log")" "$(grep -cE '\.\.\. skipped' "$out/$m.log")"
  [ $rc -eq 0 ] || fail=1
done
exit $fail
