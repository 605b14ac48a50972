#!/usr/bin/env bash
# A process killed before its exit handlers ran leaves its files in the
# runtime directory (its fd lender's socket lend.<pid>, and ctl.<pid>,
# net.<pid> when it had them). The next process to open the device removes
# them, from the dead process's registry slot (Registry::tidy_dead_slots),
# without reading the whole directory: every process used to, and signal
# each file's pid, which with 4096 processes was 33 million kill() calls.
# The process killed is one that has opened the device (so it holds a slot):
# a child of process_limit_tool, once the tool says it holds.
# usage: pid_files_killed.sh <process_limit_tool>
set -u
tool=$1
dir=$(mktemp -d /dev/shm/sv-pidfiles-XXXXXX)
export SOFTVERBS_RUNTIME_DIR=$dir
holder= child=
cleanup() { touch "$dir/release"; [ -n "$holder" ] && wait $holder; rm -rf "$dir"; }
trap cleanup EXIT
HOLD_UNTIL_FILE=$dir/release "$tool" 1 >"$dir/out" 2>&1 &
holder=$!
for _ in $(seq 300); do grep -q holding "$dir/out" && break; sleep 0.05; done
grep -q "holding: opened 1 " "$dir/out" || { echo "FAIL: the child did not open the device: $(cat "$dir/out")"; exit 1; }
# (The tool itself never opens the device: the one lend. file is its child's.)
child=$(ls "$dir" | sed -nE 's/^lend\.([0-9]+)$/\1/p' | head -1)
[ -n "$child" ] || { echo "FAIL: the child made no lend. file (files: $(ls "$dir"))"; exit 1; }
kill -9 "$child"
# Until it is dead: a zombie, its parent waiting for the release file. (A
# zombie still has its pid: the files must go all the same.)
for _ in $(seq 100); do [[ $(sed -E 's/.*\) (.).*/\1/' "/proc/$child/stat" 2>/dev/null) == Z ]] && break; sleep 0.05; done
[ -e "$dir/lend.$child" ] || { echo "FAIL: lend.$child went with the kill: the test proves nothing"; exit 1; }
echo "killed pid $child; left: $(ls "$dir" | grep -E '^(lend|ctl|net)\.' | tr '\n' ' ')"
ibv_devinfo >/dev/null || { echo "FAIL: ibv_devinfo"; exit 1; }
left=$(ls "$dir" | grep -E "^(lend|ctl|net)\.$child\$")
[ -z "$left" ] || { echo "FAIL: the next process left $left of the killed one"; exit 1; }
echo "PASS: the next process removed the killed process's files"
