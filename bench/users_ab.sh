#!/usr/bin/env bash
# Two users of one host through the host service's rings (issue 36: two
# users at >= 2 GB/s at 1 MiB), build A against build B, alternating
# within each round, ROUNDS rounds: ib_write_bw -s 1M -D 3 from root's
# client to nobody's server in one network namespace with softverbs-hostd
# (build B's) running, each process on a CPU of its own (the figure varied
# 1.4-2.7 GB/s run to run with the two processes and their threads free to
# share cores). Prints each figure's median for A and B and the ratio of
# the medians: MB/s, and the server's and the client's CPU seconds (user +
# system) per GB moved.
#   bench/users_ab.sh BUILD_A BUILD_B [ROUNDS]
# Needs root (namespaces, the service, user nobody).
set -u
lib_a=$(cd "$1/lib" && pwd) lib_b=$(cd "$2/lib" && pwd)
hostd=$(cd "$2/bin" && pwd)/softverbs-hostd
rounds=${3:-8}
export LD_LIBRARY_PATH=$lib_b
pids=()
source "$(dirname "$0")/netns_pair.sh"
netns_pair_at_exit='kill "${pids[@]}" 2>/dev/null; rm -rf "$times"'
netns_pair 10.95.5
times=$(mktemp -d)
chmod 0777 "$times"  # (nobody's server writes its time here)
nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
ip netns exec "$a" "$hostd" 2>/dev/null & pids+=($!)
sleep 0.3

# one LIBDIR: "MB/s server_cpu_s_per_GB client_cpu_s_per_GB"
one() {
  ip netns exec "$a" env LD_LIBRARY_PATH="$1" taskset -c 1 "${nobody[@]}" /usr/bin/time -o "$times/s" -f "%U %S" \
    timeout 60 ib_write_bw -s 1048576 -D 3 -x "$ga" >/dev/null 2>&1 &
  local server=$!
  sleep 0.5
  local bw
  bw=$(ip netns exec "$a" env LD_LIBRARY_PATH="$1" taskset -c 0 /usr/bin/time -o "$times/c" -f "%U %S" \
    timeout 60 ib_write_bw -s 1048576 -D 3 -x "$ga" "$ip_a" 2>/dev/null | awk '/^ *[0-9]+ +[0-9]+ /{print $4}')
  wait $server
  awk -v bw="${bw:-0}" 'FNR == 1 { cpu[FILENAME] = $1 + $2 }
    END { gb = bw * 3 / 1000; if (gb > 0) printf "%.0f %.3f %.3f\n", bw, cpu[ARGV[1]] / gb, cpu[ARGV[2]] / gb }' \
    "$times/s" "$times/c"
}
declare -a ra rb
for r in $(seq "$rounds"); do
  ra+=("$(one "$lib_a")")
  rb+=("$(one "$lib_b")")
done
python3 - "${ra[@]}" -- "${rb[@]}" <<'PY'
import statistics, sys
args = sys.argv[1:]
i = args.index("--")
rows = lambda xs: [list(map(float, x.split())) for x in xs if x.strip()]
a, b = rows(args[:i]), rows(args[i + 1:])
med = statistics.median
print(f"Two users of one host, ib_write_bw -s 1M, {len(a)} rounds alternating:")
print()
print("| figure | A | B | B/A |")
print("|---|---|---|---|")
for k, name in enumerate(["MB/s", "server CPU s per GB", "client CPU s per GB"]):
    ma, mb = med(x[k] for x in a), med(x[k] for x in b)
    print(f"| {name} | {ma:.3f} | {mb:.3f} | {mb / ma:.2f}x |" if k else f"| {name} | {ma:.0f} | {mb:.0f} | {mb / ma:.2f}x |")
PY
