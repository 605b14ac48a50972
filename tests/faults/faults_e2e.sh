#!/usr/bin/env bash
# Faults on demand (SOFTVERBS_FAULTS) in programs nobody here wrote: what
# they report, and that a seeded probability gives the same faults run
# after run.
#   faults_e2e.sh SOURCE_DIR
set -u
here=$1
source "$here/../common/tool_pair.sh"
command -v ibv_rc_pingpong >/dev/null || { echo "ibverbs-utils not installed"; exit 77; }
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT
fail=0
check() { if "${@:2}"; then echo "ok:   $1"; else echo "FAIL: $1"; fail=1; fi; }

gid=$("$here/../common/loopback_gid.sh") || { echo "FAIL: no GID for 127.0.0.1"; exit 1; }
port=$((16000 + RANDOM % 200))  # (a range no fixed-port test uses: 19000.. met e2e_xsrq_events' 19152)
# The fifth work request completes with RETRY_EXC_ERR: the pingpong says so.
tool_pair "$work/retry" "" "SOFTVERBS_FAULTS=wc=RETRY_EXC_ERR,nth=5" ibv_rc_pingpong -g "$gid" -n 50
rc=$?
check "ibv_rc_pingpong: fails at the injected completion" test $rc != 0
check "ibv_rc_pingpong: reports its status" grep -q "Failed status transport retry counter exceeded (12)" "$work/retry"
check "the fault is logged with its rule" grep -q "fault injected: QP .* work request 5 of rule 'wc=RETRY_EXC_ERR,nth=5'" "$work/retry"

# RNR retries exhausted at the tenth SEND: the pingpong says so.
tool_pair "$work/rnr" "" "SOFTVERBS_FAULTS=wc=RNR_RETRY_EXC_ERR,opcode=SEND,nth=10" ibv_rc_pingpong -g "$gid" -n 50
rc=$?
check "ibv_rc_pingpong: fails when its RNR retries run out" test $rc != 0
check "ibv_rc_pingpong: reports RNR retry counter exceeded" grep -q "Failed status RNR retry counter exceeded (13)" "$work/rnr"

# perftest's first registration fails: it says so and stops.
tool_pair "$work/mr" "" "SOFTVERBS_FAULTS=call=ibv_reg_mr,errno=ENOMEM,nth=1" ib_write_bw -x "$gid" -n 100
rc=$?
check "ib_write_bw: fails when its MR cannot be registered" test $rc != 0
check "ib_write_bw: says it could not allocate the MR" grep -q "Couldn't allocate MR" "$work/mr"

# librdmacm's calls: perftest over rdma_cm (-R) whose rdma_connect fails,
# rping whose address resolution fails; each says so and stops.
tool_pair "$work/cm_connect" "" "SOFTVERBS_FAULTS=call=rdma_connect,errno=ETIMEDOUT,nth=1" ib_write_bw -R -n 100
rc=$?
check "ib_write_bw -R: fails when rdma_connect does" test $rc != 0
check "ib_write_bw -R: says rdma_connect failed" grep -q "Function rdma_connect failed" "$work/cm_connect"
check "the fault is logged" grep -q "fault injected: rdma_connect fails with ETIMEDOUT" "$work/cm_connect"
if command -v rping >/dev/null; then
  SOFTVERBS_FAULTS="call=rdma_resolve_addr,errno=EHOSTUNREACH,nth=1" timeout 30 rping -c -a 127.0.0.1 -p "$port" -C 1 \
    >"$work/cm_resolve" 2>&1
  rc=$?
  check "rping: fails when rdma_resolve_addr does" test $rc != 0
  check "rping: reports it" grep -q "rdma_resolve_addr: No route to host" "$work/cm_resolve"
  port=$((port + 1))
fi

# A seeded probability: the same faults in two runs, others with another seed.
for run in 1 2; do
  tool_pair "$work/p$run" "" "SOFTVERBS_FAULTS=wc=REM_ACCESS_ERR,p=0.02,seed=7" ibv_rc_pingpong -g "$gid" -n 500
done
tool_pair "$work/p3" "" "SOFTVERBS_FAULTS=wc=REM_ACCESS_ERR,p=0.02,seed=8" ibv_rc_pingpong -g "$gid" -n 500
first() { grep -o "work request [0-9]* of rule" "$1" | head -1; }
check "p=0.02 seed=7: a fault within 500 iterations" test -n "$(first "$work/p1")"
check "p=0.02 seed=7: the same work request in both runs ($(first "$work/p1"))" test "$(first "$work/p1")" = "$(first "$work/p2")"
check "p=0.02 seed=8: another one ($(first "$work/p3"))" test "$(first "$work/p3")" != "$(first "$work/p1")"

# A running ibv_rc_pingpong, broken from outside at a moment of our
# choosing (softverbs-stat -p PID -f RULES): it reports the status.
if [[ -x ${SOFTVERBS_STAT_TOOL:-} ]]; then
  timeout 60 ibv_rc_pingpong -g "$gid" -n 100000000 -p "$port" >"$work/live.server" 2>&1 &
  pids+=($!)
  wait_tcp_port "$port" 10 $!
  ibv_rc_pingpong -g "$gid" -n 100000000 -p "$port" 127.0.0.1 >"$work/live" 2>&1 &
  client=$!
  pids+=("$client")
  sleep 0.5  # (well into its iterations)
  "$SOFTVERBS_STAT_TOOL" -p "$client" -f "wc=REM_ACCESS_ERR,nth=1" >"$work/live.set" 2>&1
  check "softverbs-stat -f: the running client took the rule ($(cat "$work/live.set"))" grep -q "1 rules in force" "$work/live.set"
  for _ in $(seq 100); do kill -0 "$client" 2>/dev/null || break; sleep 0.1; done
  check "the client ended at the fault" eval '! kill -0 "$client" 2>/dev/null'
  check "ibv_rc_pingpong reports the status" grep -q "Failed status remote access error" "$work/live"
  check "the log says where the rules came from" grep -q "fault rules from outside: 'wc=REM_ACCESS_ERR,nth=1'" "$work/live"
  port=$((port + 1))
else
  echo "FAIL: SOFTVERBS_STAT_TOOL: the softverbs-stat binary"; fail=1
fi

# A peer that vanishes mid-transfer: ib_send_bw's server dies (SIGKILL) at
# its 600th receive post; the client's SENDs in flight end as on a NIC
# whose peer is gone: transport retry counter exceeded (status 12).
SOFTVERBS_FAULTS="vanish=kill,nth=600" timeout 30 ib_send_bw -x "$gid" -n 5000 -p "$port" >"$work/vanish.server" 2>&1 &
server=$!
pids+=("$server")
wait_tcp_port "$port" 10 "$server"
timeout 30 ib_send_bw -x "$gid" -n 5000 -p "$port" 127.0.0.1 >"$work/vanish" 2>&1
client_rc=$?
wait "$server"
server_rc=$?
check "vanish=kill: the server died of SIGKILL (exit $server_rc)" test "$server_rc" = 137
check "vanish=kill: the log said so first" grep -q "post 600 of rule 'vanish=kill,nth=600': the process vanishes" "$work/vanish.server"
check "the client fails (exit $client_rc)" test "$client_rc" != 0
check "the client's SENDs: retry counter exceeded" grep -q "Failed status 12" "$work/vanish"
port=$((port + 1))

# Rules that do not parse: no device, and why.
bad=$(SOFTVERBS_FAULTS="call=ibv_reg_mr,nth=zero" ibv_devinfo 2>&1)
check "a bad rule: no device listed" grep -q "No IB devices found" <<<"$bad"
check "a bad rule: says why" grep -q "SOFTVERBS_FAULTS: rule 1 (call=ibv_reg_mr,nth=zero): nth: a number from 1" <<<"$bad"
((fail)) && for f in "$work"/*; do echo "== $f"; tail -n 5 "$f"; done
exit $fail
