#!/usr/bin/env bash
# A process killed before its exit handlers ran leaves its files in the
# runtime directory (its fd lender's socket lend.<pid>, and ctl.<pid>,
# net.<pid> when it had them). The next process to open the device removes
# them, from the dead process's registry slot (Registry::tidy_dead_slots),
# without reading the whole directory: every process used to, and signal
# each file's pid, which with 4096 processes was 33 million kill() calls.
# usage: pid_files_killed.sh
set -u
dir=$(mktemp -d /dev/shm/sv-pidfiles-XXXXXX)
export SOFTVERBS_RUNTIME_DIR=$dir
server=
cleanup() { [ -n "$server" ] && kill -9 $server 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
ibv_rc_pingpong -p 18733 >/dev/null 2>&1 &
server=$!
for _ in $(seq 200); do [ -e "$dir/lend.$server" ] && break; sleep 0.05; done
[ -e "$dir/lend.$server" ] || { echo "FAIL: the server made no lend.$server (files: $(ls "$dir"))"; exit 1; }
kill -9 $server; wait $server 2>/dev/null; server_pid=$server; server=
[ -e "$dir/lend.$server_pid" ] || { echo "FAIL: lend.$server_pid went with the kill: the test proves nothing"; exit 1; }
echo "killed pid $server_pid; left: $(ls "$dir" | grep -E '^(lend|ctl|net)\.' | tr '\n' ' ')"
ibv_devinfo >/dev/null || { echo "FAIL: ibv_devinfo"; exit 1; }
left=$(ls "$dir" | grep -E "^(lend|ctl|net)\.$server_pid\$")
[ -z "$left" ] || { echo "FAIL: the next process left $left of the killed one"; exit 1; }
echo "PASS: the next process removed the killed process's files"
