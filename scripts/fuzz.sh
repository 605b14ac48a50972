#!/usr/bin/env bash
# Coverage-guided fuzzing of the network decoders (tests/fuzz): configures a
# clang build with -DSOFTVERBS_FUZZ=ON, builds only the fuzz targets, and
# runs each for a bounded time from its seed corpus. Fails on any crash,
# leak, sanitizer report or timeout; the input that caused it is kept in
# BUILD/fuzz-artifacts/ (add it to tests/fuzz/corpus/TARGET/ with the fix).
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     (default 60)
#   scripts/fuzz.sh --build-only              (builds the targets, runs none)
# FUZZ_BUILD_DIR overrides the build directory (default build-fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=false seconds=60
case ${1:-} in
  --build-only) build_only=true ;;
  ?*) seconds=$1 ;;
esac
build=${FUZZ_BUILD_DIR:-build-fuzz}
targets=(roce_packet cm_mad)

cmake -S . -B "$build" -DSOFTVERBS_FUZZ=ON -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2 --target "${targets[@]/#/fuzz_}"
if $build_only; then exit 0; fi

mkdir -p "$build/fuzz-artifacts"
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
fuzz_one() {  # TARGET: fuzzes it for $seconds; its report in $build/fuzz-TARGET.report
  local t=$1 found rc=0
  # New inputs go to a scratch directory: the repository's corpus is only read.
  found=$(mktemp -d)
  {
    echo "=== fuzz_$t, ${seconds} s"
    "$build/bin/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$build/fuzz-artifacts/$t-" "$found" "tests/fuzz/corpus/$t" 2>"$build/fuzz-$t.log" || rc=$?
    if ((rc)); then
      tail -60 "$build/fuzz-$t.log"
      echo "FAIL: fuzz_$t crashed; its input: $(ls "$build/fuzz-artifacts/$t-"* 2>/dev/null | head -1)"
    else
      grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "$build/fuzz-$t.log" || true
      echo "$(ls "$found" | wc -l) new inputs this run (not kept)"
    fi
  } >"$build/fuzz-$t.report"
  rm -rf "$found"
  return $rc
}
# The targets run side by side, one per core: each still gets its full time.
pids=()
for t in "${targets[@]}"; do
  fuzz_one "$t" &
  pids+=($!)
done
failed=0
for i in "${!targets[@]}"; do
  wait "${pids[$i]}" || failed=1
  cat "$build/fuzz-${targets[$i]}.report"
done
exit $failed
