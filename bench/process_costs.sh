#!/usr/bin/env bash
# What a process costs to start and to keep (issue 39, item 6): N processes
# at once (1, 64, 254, 1024, 4096: one namespace host's registry holds 4096;
# SIZES="..." chooses others) each open the
# device and make a PD, a CQ, an RC QP and a 4 KiB MR, then sleep until all
# are ready (bench/micro/process_startup). Prints a Markdown table: the wall
# time until all were ready and per process, each process's own start-up
# time (median, p99, max), and what each holds (PSS, and of it the shared
# memory's share). ROUNDS rounds, the round with the median wall time.
#   bench/process_costs.sh [BUILD_DIR] [ROUNDS]
# A/B: BASELINE_LIB=<another build>/lib runs the same program against that
# libibverbs.so.1 too, row by row in the same run, up to BASELINE_MAX
# processes (default 254: a build before names were leased in blocks had
# 255 slots). No root; a domain of its
# own (SOFTVERBS_DOMAIN), removed at the end.
set -u
build=${1:-build}
rounds=${2:-3}
program="$build/bin/process_startup"
[[ -x $program ]] || { echo "no $program: build the tree first (target process_startup)" >&2; exit 1; }
libraries=("this=$(cd "$build/lib" && pwd)")
[[ -n ${BASELINE_LIB:-} ]] && libraries+=("baseline=$(cd "$BASELINE_LIB" && pwd)")
export SOFTVERBS_DOMAIN=proccost$$
trap 'rm -f /dev/shm/softverbs-proccost$$.*' EXIT

echo "| build | processes | wall ms | wall per process ms | start-up median us | p99 us | max us | PSS kB | of it shared kB |"
echo "|---|---|---|---|---|---|---|---|---|"
for n in ${SIZES:-1 64 254 1024 4096}; do
  for entry in "${libraries[@]}"; do
    name=${entry%%=*} dir=${entry#*=}
    [[ $name == baseline ]] && ((n > ${BASELINE_MAX:-254})) && continue
    for r in $(seq "$rounds"); do
      LD_LIBRARY_PATH=$dir "$program" "$n" || echo "failed"
    done | awk -v name="$name" -v n="$n" '
      /^processes/ { for (i = 1; i < NF; i += 2) v[$i] = $(i + 1)
                     line[++k] = sprintf("%.1f %.2f %s %s %s %s %s", v["wall_ms"], v["wall_ms"] / n,
                       v["start_us_median"], v["p99"], v["max"], v["pss_kB_median"], v["pss_shmem_kB_median"]) }
      END { if (!k) { printf "| %s | %d | failed |\n", name, n; exit }
            # the median round by wall time
            for (i = 1; i <= k; ++i) { split(line[i], f, " "); wall[i] = f[1] }
            for (i = 1; i <= k; ++i) { below = 0; for (j = 1; j <= k; ++j) below += wall[j] < wall[i]
                                       if (below == int((k - 1) / 2)) { m = i; break } }
            split(line[m], f, " ")
            printf "| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", name, n, f[1], f[2], f[3], f[4], f[5], f[6], f[7] }'
  done
done
