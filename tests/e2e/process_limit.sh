#!/usr/bin/env bash
# The README's process limit is the one an application meets: as many
# processes as it says open the device at once, in a domain of their own,
# and the next one gets EAGAIN (and opening never hangs or crashes).
# With AS_USER=nobody (as CTest runs it, when root), as user nobody
# (tests/e2e/as_nobody.sh): the limit is the same for a user without
# privileges (issue 39: "as root and as a user"; process_limit_netns.sh
# fills a host as root).
# usage: process_limit.sh <process_limit_tool> <README.md>
set -u
tool=$1 readme=$2
run=()
if [[ ${AS_USER:-} == nobody ]]; then
  . "$(dirname "$0")/as_nobody.sh"
  need_nobody || exit
  run=("${as_nobody[@]}")
fi
limit=$(grep -oE '[0-9]+ processes per domain' "$readme" | grep -oE '^[0-9]+') ||
  { echo "the README states no process limit"; exit 1; }
export SOFTVERBS_DOMAIN=limit$$
trap 'rm -f /dev/shm/softverbs-limit$$.v*' EXIT
out=$(timeout 240 "${run[@]}" "$tool" $((limit + 1))) || { echo "tool failed: $out"; exit 1; }
echo "$out (README says $limit)"
opened=$(sed -E 's/.* opened ([0-9]+) .*/\1/' <<<"$out")
first_error=$(sed -E 's/.* first_error ([0-9]+) .*/\1/' <<<"$out")
[ "$opened" = "$limit" ] || { echo "FAIL: $opened processes opened the device, the README says $limit"; exit 1; }
[ "$first_error" = "$(python3 -c 'import errno; print(errno.EAGAIN)')" ] ||
  { echo "FAIL: process $((limit + 1)) got errno $first_error, not EAGAIN"; exit 1; }
echo "PASS: $limit processes open the device at once, the next gets EAGAIN${AS_USER:+ (as $AS_USER)}"
