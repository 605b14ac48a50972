#!/usr/bin/env bash
# Every environment knob the library reads (src/util/knobs.cpp) is in the
# README's knob table, in docs/ARCHITECTURE.md and in softverbs(7), the
# man page the Debian package installs.
#   every_knob_documented.sh SOURCE_DIR
set -u
src=$1
knobs=$(grep -o '"SOFTVERBS_[A-Z_]*"' "$src/src/util/knobs.cpp" | tr -d '"' | sort -u)
[[ -n $knobs ]] || { echo "no knobs found in src/util/knobs.cpp"; exit 1; }
fail=0
for doc in README.md docs/ARCHITECTURE.md packaging/man/softverbs.7; do
  for knob in $knobs; do
    grep -q "$knob" "$src/$doc" || { echo "FAIL: $doc does not mention $knob"; fail=1; }
  done
done
((fail)) || echo "ok: $(wc -w <<<"$knobs") knobs, each in the README, docs/ARCHITECTURE.md and softverbs(7)"
exit $fail
