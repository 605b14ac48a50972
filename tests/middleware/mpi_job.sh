#!/usr/bin/env bash
# An MPI job over softverbs, started as the README tells a user
# (`softverbs-run mpirun ...`), with the MPI library told to use softverbs
# only (no shared memory, no TCP for messages):
#   mpi_job.sh [--hosts] STACK RANKS PROGRAM [ARGS...]
# STACK:
#   ompi-ucx      Open MPI, pml ucx, osc ucx; UCX_TLS=rc_verbs,ud_verbs,self
#   ompi-ofi-rxm  Open MPI, pml cm + mtl ofi, FI_PROVIDER="verbs;ofi_rxm" (osc pt2pt)
#   ompi-ofi-rxd  the same over "verbs;ofi_rxd" (UD)
#   ompi-openib   Open MPI, pml ob1 + btl openib (osc rdma over it), on the
#                 InfiniBand link-layer mode: Debian's openib has only the UD
#                 connection manager (udcm), which refuses Ethernet ports
#   mpich         MPICH (ch4:ucx); UCX_TLS=rc_verbs,ud_verbs,self
# --hosts: two hosts made of network namespaces on a veth link, RANKS/2 in
# each; the launcher starts the other host's daemon through ns_agent.sh,
# and RoCEv2 packets must cross the link (an nftables counter in host B).
# With HOSTS=N (N > 2): N such hosts on one bridge, RANKS/N in each.
# Every rank must have opened softverbs (its log line) and the job must
# exit 0; EXPECT (environment, a regex) must match EXPECT_COUNT lines (1)
# of the output, REJECT none. FORWARDED_AT_MOST=P (with --hosts): every rank
# prints its RoCEv2 counters at exit, and at most P% of the packets the
# ranks received may have come through another rank's process (forwarded:
# the kernel gave that flow to it; transport/roce_steering.h). For
# experiments: EXTRA_X names one more
# variable for Open MPI to pass to every rank (-x), OPENIB_FLAGS sets
# btl_openib_flags (e.g. send,put).
set -u
here=$(cd "$(dirname "$0")" && pwd)
hosts=0
[[ ${1:-} == --hosts ]] && { hosts=1; shift; }
stack=$1 ranks=$2
shift 2
program=("$@")
run=${SOFTVERBS_RUN:?the softverbs-run launcher}
limit=${LIMIT:-120}
case $stack in
  ompi-*) command -v mpirun.openmpi >/dev/null || { echo "Open MPI not installed"; exit 77; } ;;
  mpich) command -v mpiexec.mpich >/dev/null || { echo "MPICH not installed"; exit 77; } ;;
esac
command -v "${program[0]}" >/dev/null || { echo "${program[0]} not found"; exit 77; }

out=$(mktemp -d)
a="" b=""
host_ns=()
cleanup() {
  ((${#host_ns[@]})) && delete_hosts
  [[ -n $a ]] && ip netns del "$a" 2>/dev/null
  [[ -n $b ]] && ip netns del "$b" 2>/dev/null
  rm -rf "$out"
}
trap cleanup EXIT

# What every rank gets: softverbs says when it opens the device.
export SOFTVERBS_LOG=debug
ucx_env=(UCX_NET_DEVICES=softverbs0:1 UCX_TLS=rc_verbs,ud_verbs,self)
ompi=(mpirun.openmpi --oversubscribe -np "$ranks" -x SOFTVERBS_LOG -x LD_LIBRARY_PATH ${EXTRA_X:+-x $EXTRA_X}
  --mca btl_base_warn_component_unused 0)
((EUID == 0)) && ompi+=(--allow-run-as-root)
case $stack in
  ompi-ucx) ompi+=(--mca pml ucx --mca pml_ucx_devices any --mca osc ucx --mca btl self)
    for v in "${ucx_env[@]}"; do ompi+=(-x "$v"); done ;;
  ompi-ofi-rxm | ompi-ofi-rxd)
    provider="verbs;ofi_${stack#ompi-ofi-}"
    ompi+=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "$provider" --mca osc pt2pt --mca btl self
      -x "FI_PROVIDER=$provider") ;;
  ompi-openib)
    export SOFTVERBS_LINK_LAYER=infiniband
    ompi+=(--mca pml ob1 --mca btl openib,self --mca btl_openib_allow_ib 1 --mca btl_openib_if_include softverbs0:1
      --mca btl_openib_cpc_include udcm --mca btl_openib_warn_no_device_params_found 0 --mca osc rdma
      ${OPENIB_FLAGS:+--mca btl_openib_flags "$OPENIB_FLAGS"} -x SOFTVERBS_LINK_LAYER) ;;
  mpich) ;;
  *) echo "unknown stack $stack"; exit 2 ;;
esac

if [[ -n ${FORWARDED_AT_MOST:-} ]]; then
  export SOFTVERBS_STAT_AT_EXIT=1
  ompi+=(-x SOFTVERBS_STAT_AT_EXIT)
fi

in_a=()
if ((hosts)); then
  source "$here/../e2e/two_hosts.sh"
  nhosts=${HOSTS:-2}
  if ((nhosts > 2)); then
    hosts_tag=svpH$$- switch_ns=svpS$$
    make_hosts "$nhosts" 10.96.0 || exit $?
    namespaces=("${host_ns[@]}")  # host i's is namespaces[i - 1]
  else
    a=svpA$$ b=svpB$$ va=svpa$$ vb=svpb$$
    make_two_hosts 10.96.0 || exit $?
    namespaces=("$a" "$b")
  fi
  in_a=(ip netns exec "${namespaces[0]}" "$here/as_host.sh" 10.96.0.1)
  count_roce_sent "${namespaces[1]}" || exit $?
  per=$((ranks / nhosts))
  SV_HOSTS= placement=
  for i in $(seq "$nhosts"); do
    SV_HOSTS+="10.96.0.$i=${namespaces[i - 1]} "
    placement+="${placement:+,}10.96.0.$i:$((i < nhosts ? per : ranks - per * (nhosts - 1)))"
  done
  export SV_HOSTS SOFTVERBS_RUN=$run
  # --bind-to none: the "hosts" share this machine's cores, and each
  # host's daemon would bind its first rank to core 0: two ranks polling on
  # one core, each message waiting a scheduler tick (4 ms) for the other.
  ompi+=(--bind-to none -H "$placement" --mca plm_rsh_agent "$here/ns_agent.sh"
    --mca plm_rsh_no_tree_spawn 1 --mca oob_tcp_if_include 10.96.0.0/24)
  mpich_hosts=(-launcher rsh -launcher-exec "$here/ns_agent.sh" -hosts "$placement" -localhost 10.96.0.1)
fi

if [[ $stack == mpich ]]; then
  cmd=(env "${ucx_env[@]}" mpiexec.mpich -n "$ranks" ${mpich_hosts[@]+"${mpich_hosts[@]}"} "${program[@]}")
else
  cmd=("${ompi[@]}" "${program[@]}")
fi
echo "+ ${cmd[*]}"
# (stdout and stderr apart: the launchers forward each rank's to their own,
# and softverbs' log lines on stderr would otherwise cut the program's lines.)
# A job still running shortly before its limit: every rank's stacks first
# (with_stacks.sh sees only the launcher), so a hang says where it was.
( sleep $((limit - 5)) && for pid in $(pgrep -f "^${program[0]}( |$)"); do
    echo "=== stacks of rank process $pid ($(tr '\0' ' ' </proc/$pid/cmdline 2>/dev/null))"
    timeout -k 5 20 gdb -batch -nx -ex 'thread apply all bt 25' -p "$pid" 2>/dev/null | grep -E '^(#|Thread)'
  done >"$out/stacks" 2>&1 ) &
watchdog=$!
"${in_a[@]}" "$here/../e2e/with_stacks.sh" "$limit" "$run" "${cmd[@]}" >"$out/job" 2>"$out/err"
rc=$?
pkill -P "$watchdog" 2>/dev/null; kill "$watchdog" 2>/dev/null
[[ -s $out/stacks ]] && cat "$out/stacks"
{ cat "$out/job"; grep -v ' debug: ' "$out/err"; } >"$out/all"
cat "$out/all"
opened=$(grep -c 'debug: attached to .* as slot' "$out/err")
echo "--- exit $rc; processes that opened softverbs: $opened (ranks: $ranks)"
((rc == 0)) || exit 1
((opened >= ranks)) || { echo "not every rank opened softverbs"; exit 1; }
if [[ -n ${EXPECT:-} ]] && (($(grep -Ec -- "$EXPECT" "$out/all") < ${EXPECT_COUNT:-1})); then
  echo "output does not match $EXPECT (${EXPECT_COUNT:-1} lines)"; exit 1
fi
if [[ -n ${REJECT:-} ]] && grep -Eq -- "$REJECT" "$out/all"; then
  echo "output matches what it must not: $REJECT"; exit 1
fi
if ((hosts)); then
  roce_crossed_link "${namespaces[1]}" || exit 1
fi
if [[ -n ${FORWARDED_AT_MOST:-} ]]; then
  read -r received forwarded < <(awk '/^ *device /{for(i=2;i<NF;i++){if($i=="packets_received")r+=$(i+1); if($i=="forwarded")f+=$(i+1)}} END{print r+0, f+0}' "$out/err")
  echo "RoCEv2 packets the ranks received: $received; forwarded from one rank's process to another's: $forwarded"
  ((received > 0)) || { echo "no counters from the ranks (SOFTVERBS_STAT_AT_EXIT)"; exit 1; }
  ((forwarded * 100 <= received * FORWARDED_AT_MOST)) || { echo "more than $FORWARDED_AT_MOST% forwarded"; exit 1; }
fi
exit 0
