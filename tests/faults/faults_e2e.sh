#!/usr/bin/env bash
# Faults on demand (SOFTVERBS_FAULTS) in programs nobody here wrote: what
# they report, and that a seeded probability gives the same faults run
# after run.
#   faults_e2e.sh SOURCE_DIR
set -u
here=$1
source "$here/../common/tcp_port.sh"
command -v ibv_rc_pingpong >/dev/null || { echo "ibverbs-utils not installed"; exit 77; }
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT
fail=0
check() { if "${@:2}"; then echo "ok:   $1"; else echo "FAIL: $1"; fail=1; fi; }

gid=$(ibv_devinfo -v | sed -nE 's/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]+::ffff:127\.0\.0\.1,.*/\1/p' | head -1)
[[ -n $gid ]] || { echo "FAIL: no GID for 127.0.0.1"; exit 1; }
port=$((19000 + RANDOM % 200))
# pair OUT CLIENT_FAULTS TOOL ARGS...: TOOL's server (no faults) and client
# (with CLIENT_FAULTS); the client's status. The server is stopped after.
pair() {
  local out=$1 faults=$2
  shift 2
  timeout 30 "$@" -p "$port" >"$out.server" 2>&1 &
  local server=$!
  pids+=("$server")
  wait_tcp_port "$port" 10 "$server"
  SOFTVERBS_FAULTS=$faults timeout 30 "$@" -p "$port" 127.0.0.1 >"$out" 2>&1
  local rc=$?
  kill "$server" 2>/dev/null
  wait "$server" 2>/dev/null
  port=$((port + 1))
  return $rc
}

# The fifth work request completes with RETRY_EXC_ERR: the pingpong says so.
pair "$work/retry" "wc=RETRY_EXC_ERR,nth=5" ibv_rc_pingpong -g "$gid" -n 50
rc=$?
check "ibv_rc_pingpong: fails at the injected completion" test $rc != 0
check "ibv_rc_pingpong: reports its status" grep -q "Failed status transport retry counter exceeded (12)" "$work/retry"
check "the fault is logged with its rule" grep -q "fault injected: QP .* work request 5 of rule 'wc=RETRY_EXC_ERR,nth=5'" "$work/retry"

# perftest's first registration fails: it says so and stops.
pair "$work/mr" "call=ibv_reg_mr,errno=ENOMEM,nth=1" ib_write_bw -x "$gid" -n 100
rc=$?
check "ib_write_bw: fails when its MR cannot be registered" test $rc != 0
check "ib_write_bw: says it could not allocate the MR" grep -q "Couldn't allocate MR" "$work/mr"

# A seeded probability: the same faults in two runs, others with another seed.
for run in 1 2; do
  pair "$work/p$run" "wc=REM_ACCESS_ERR,p=0.02,seed=7" ibv_rc_pingpong -g "$gid" -n 500
done
pair "$work/p3" "wc=REM_ACCESS_ERR,p=0.02,seed=8" ibv_rc_pingpong -g "$gid" -n 500
first() { grep -o "work request [0-9]* of rule" "$1" | head -1; }
check "p=0.02 seed=7: a fault within 500 iterations" test -n "$(first "$work/p1")"
check "p=0.02 seed=7: the same work request in both runs ($(first "$work/p1"))" test "$(first "$work/p1")" = "$(first "$work/p2")"
check "p=0.02 seed=8: another one ($(first "$work/p3"))" test "$(first "$work/p3")" != "$(first "$work/p1")"

# Rules that do not parse: no device, and why.
bad=$(SOFTVERBS_FAULTS="call=ibv_reg_mr,nth=zero" ibv_devinfo 2>&1)
check "a bad rule: no device listed" grep -q "No IB devices found" <<<"$bad"
check "a bad rule: says why" grep -q "SOFTVERBS_FAULTS: rule 1 (call=ibv_reg_mr,nth=zero): nth: a number from 1" <<<"$bad"
((fail)) && for f in "$work"/*; do echo "== $f"; tail -n 5 "$f"; done
exit $fail
