#!/usr/bin/env bash
# What one verb costs as a process's objects grow (issue 39, item 3): a NIC
# registers an MR, or destroys a QP, at about the same cost whether the
# process holds a thousand or sixty thousand. Each figure runs
# bench/micro/object_scale (built in BUILD_DIR) at 1k, 10k and 64k objects
# in one process and prints a Markdown table: the run's total, and the mean
# cost of one call at the start, the quartiles and the end of the run, so a
# cost that grows with the objects already there shows as a rising row.
#   bench/object_costs.sh [BUILD_DIR] [FIGURE...]
# FIGUREs: registration, destroy (default: all). Needs bash, awk and the
# build; no root, no other tools.
# A/B: BASELINE_LIB=<another build>/lib runs the same program against that
# libibverbs.so.1 as well, row by row in the same run (the program uses the
# public verbs API only, so any build's library serves).
# Each figure is a function fig_<name> printing its table; a new figure is
# one more function and its name in `figures`.
set -u
build=${1:-build}
shift $(($# > 0 ? 1 : 0))
program="$build/bin/object_scale"
[[ -x $program ]] || { echo "no $program: build the tree first (target object_scale)" >&2; exit 1; }
this_lib=$(cd "$build/lib" && pwd)
figures=(registration destroy)
(($# > 0)) && figures=("$@")

# The libraries to measure, as "name=dir".
libraries=("this=$this_lib")
[[ -n ${BASELINE_LIB:-} ]] && libraries+=("baseline=$(cd "$BASELINE_LIB" && pwd)")

# run LIB_DIR KIND COUNT: object_scale's line.
run() {
  LD_LIBRARY_PATH=$1 "$program" "$2" "$3"
}

# row LINE PART: "total | first | p25 | p50 | p75 | last" of the part of
# object_scale's line that starts with PART ("registration 4.95 s, first=...").
row() {
  awk -v part="$2" '{
    line = $0
    at = index(line, part " "); if (!at) { print "(no " part ")"; exit }
    line = substr(line, at); sub(/;.*/, "", line)
    split(line, w, " "); total = w[2]
    out = total " s"
    n = split(line, f, /[ ,]+/)
    for (i = 1; i <= n; i++) if (f[i] ~ /^(first|p25|p50|p75|last)=/) { split(f[i], kv, "="); out = out " | " kv[2] }
    print out
  }' <<<"$1"
}

# table KIND PART TITLE COUNT...: one row per count and library.
table() {
  local kind=$1 part=$2 title=$3
  shift 3
  echo "### $title"
  echo
  echo "| objects | library | total | first | 25% | 50% | 75% | last (us per call: means of a tenth of the run, at most 256 calls) |"
  echo "|---|---|---|---|---|---|---|---|"
  local n entry line
  for n in "$@"; do
    for entry in "${libraries[@]}"; do
      line=$(run "${entry#*=}" "$kind" "$n") || line="(failed)"
      echo "  $kind $n ${entry%%=*}: $line" >&2
      echo "| $n | ${entry%%=*} | $(row "$line" "$part") |"
    done
  done
  echo
}

# ibv_reg_mr of 4 KiB MRs, each a page of one mapping (written first, as an
# application's buffers are), then all deregistered.
fig_registration() {
  table mr registration "ibv_reg_mr of 4 KiB, one process" 1000 10000 65535
}

# ibv_destroy_qp of RC QPs sharing one CQ (cqe 2N), connected in pairs.
fig_destroy() {
  table qp destroy "ibv_destroy_qp, connected RC QPs sharing one CQ" 1000 10000 65536
}

for f in "${figures[@]}"; do
  declare -F "fig_$f" >/dev/null || { echo "no figure '$f' (have: $(declare -F | awk '/fig_/ {sub("fig_", "", $3); printf "%s ", $3}'))" >&2; exit 2; }
  "fig_$f"
done
