#!/usr/bin/env bash
# Two hosts made of network namespaces joined by a veth pair (created here,
# deleted on exit; no traffic leaves them), talking RoCEv2 through
# softverbs: one of Debian's tools as server in host A and client in host B.
#   roce_netns.sh [--ipv6] [--netem "SPEC"] [--drop PERCENT] [--drop-data PERCENT] [--pcap] pingpong|perftest TOOL [ARGS...]
#     --stats   the tools print their counters (SOFTVERBS_STAT_AT_EXIT=1:
#               each QP's as it is destroyed, the device's at exit, the lines
#               of softverbs-stat): packets must show, per process and per
#               QP, and with --drop/--drop-data the recovery (NAKs, retransmits)
#     --expect-counter "NAME..."  (with --stats) a process's device counter
#               NAME must be above 0 (rnr_naks_received: RNR happened)
#     --faults RULES  both tools run with SOFTVERBS_FAULTS=RULES (packet=
#               rules: softverbs' own packet faults); at least one fault
#               must be logged
#     --trace   both tools write their timeline (SOFTVERBS_TRACE): each file
#               must parse, show the QPs' packets as a counter track, and
#               with --faults the recovery (retransmissions, NAKs, probes)
#               as events on a QP's track
#     --live-faults RULES  the same, switched on in the running client (the
#               first pair's) a second after it started, by softverbs-stat
#               -p PID -f RULES ($SOFTVERBS_STAT_TOOL)
#     --self-pcap  the tools write their own captures (SOFTVERBS_PCAP), checked
#               the same way
#     --pairs N N server/client pairs at once (several processes per host)
#     --max-forwarded-share PERCENT  (with --stats) of the packets the
#               processes received, at most PERCENT % may have been handed on
#               to another process of the host (counter forwarded): the
#               kernel must bring each pair's flow to its own process
#               (roce_steering.h)
#     --ipv6    RoCE over IPv6 (GIDs fd93::1, fd93::2); the tools still exchange
#               their QP numbers over IPv4 TCP (Debian's pingpong servers listen on IPv4)
#     pingpong  ibv_*_pingpong: -g <GID index>; both must report their iterations
#     perftest  ib_*_{lat,bw}: -x <GID index>; the client must print its table
#     --netem   tc netem SPEC on both ends of the link (loss, duplicate, reorder,
#               delay); skipped (77) where the kernel has no netem
#     --impair "ARGS"  where netem is missing: each host's RoCEv2 packets go
#               through impair_queue ARGS ($IMPAIR_QUEUE; iptables NFQUEUE):
#               --hold PERCENT MS (reordering), --delay MS, --drop PERCENT,
#               --drop-data PERCENT, --drop-naks PERCENT (below).
#               Skipped (77) without it. The tool's counts must show the impairment
#     --dup PERCENT  nftables copies PERCENT % of each host's RoCEv2 sends
#               (a GSO send is copied whole: a run of duplicates)
#     --drop    nftables drops PERCENT % of the RoCEv2 sends of each host
#               (random loss without netem; a GSO send is dropped whole: a
#               burst of packets, with any ACK that rode at its end)
#     --drop-data PERCENT  PERCENT % of the packets over 200 bytes (data,
#               not ACKs), each packet on its own: through impair_queue,
#               which the kernel hands GSO sends cut into their packets
#               (nftables sees a GSO send whole, and softverbs sends an ACK as
#               the last segment of the reply it was held for: dropping the
#               "data" there dropped that ACK too). For ping-pong tools a
#               lost last ACK fails the run: the peer may have exited before
#               the retransmission, and the sender's IBV_WC_RETRY_EXC_ERR is
#               then right (a NIC gives the same)
#     --drop-naks PERCENT  also drop that share of the PSN sequence-error
#               NAKs (RC ACKNOWLEDGE with AETH syndrome 0x60), wherever they
#               ride (impair_queue): recovery must then come from the
#               requester's loss probe or ACK timer
#     --pcap    capture the link; tshark must decode every packet as RoCE with
#               no malformed one, and each ICRC is checked by an independent
#               computation (Python's zlib)
#   roce_netns.sh [options] cm "SERVER COMMAND" "CLIENT COMMAND" [CLIENT REGEX]
#     connection manager tools (rping, perftest -R, udaddy, ...): the server
#     in host A, the client in host B; @A in a command is A's address, @B B's. Both
#     must exit 0 and the client's output match the regex. Environment:
#     CM_SERVER_RUNS_FOREVER=1 (cmtime): the server is stopped after the client;
#     CM_CLIENT_FAILS=1: the client must fail (the regex then matches its error);
#     CM_NO_MADS=1 (with --pcap; rsockets datagrams, multicast): UD SENDs on the link, not CM MADs
#     CM_READY=REGEX: the client starts once the server's output matches it
#     CM_UNEXPECTED=REGEX: neither output may match it (cmtime reports failed
#     connections and still exits 0)
#     CM_MULTICAST=GROUP (with --pcap): the UD SENDs must go to that group address
set -u
trace=0 faults="" live_faults="" netem="" impair="" dup="" drop="" drop_data="" drop_naks="" pcap=0 ipv6=0 stats=0 pairs=1 self_pcap=0 expect_counter="" max_forwarded=""
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --netem) netem=$2; shift 2 ;;
    --impair) impair=$2; shift 2 ;;
    --dup) dup=$2; shift 2 ;;
    --drop) drop=$2; shift 2 ;;
    --drop-data) drop_data=$2; shift 2 ;;
    --drop-naks) drop_naks=$2; shift 2 ;;
    --pcap) pcap=1; shift ;;
    --self-pcap) self_pcap=1; shift ;;
    --ipv6) ipv6=1; shift ;;
    --stats) stats=1; shift ;;
    --expect-counter) expect_counter=$2; shift 2 ;;
    --faults) faults=$2; shift 2 ;;
    --live-faults) live_faults=$2; shift 2 ;;
    --trace) trace=1; shift ;;
    --pairs) pairs=$2; shift 2 ;;
    --max-forwarded-share) max_forwarded=$2; shift 2 ;;
    *) echo "unknown option $1"; exit 2 ;;
  esac
done
kind=$1 tool=$2
shift 2
# Per-packet loss classes go through impair_queue with the rest.
[[ -n $drop_data ]] && impair+=" --drop-data $drop_data"
[[ -n $drop_naks ]] && impair+=" --drop-naks $drop_naks"
lossy=0
[[ -n $drop || $impair == *--drop* ]] && lossy=1
if [[ $kind == cm ]]; then
  server_cmd=$tool client_cmd=$1 expect=${2:-}
  tool=${server_cmd%% *}
fi
command -v "$tool" >/dev/null || { echo "$tool not installed"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
a=svA$$ b=svB$$ va=sva$$ vb=svb$$
work=$(mktemp -d)
cleanup() {
  [[ -n ${cap_pid:-} ]] && kill "$cap_pid" 2>/dev/null
  [[ -n ${impair_pids:-} ]] && kill $impair_pids 2>/dev/null
  ip netns del "$a" 2>/dev/null
  ip netns del "$b" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$a" 2>/dev/null && ip netns add "$b" || { echo "cannot create network namespaces"; exit 77; }
addr_a=10.93.0.1 gid_a=::ffff:10.93.0.1 gid_b=::ffff:10.93.0.2
((ipv6)) && gid_a=fd93::1 gid_b=fd93::2
ip link add "$va" type veth peer name "$vb" &&
  ip link set "$va" netns "$a" && ip link set "$vb" netns "$b" &&
  ip -n "$a" addr add 10.93.0.1/24 dev "$va" && ip -n "$b" addr add 10.93.0.2/24 dev "$vb" &&
  { ((!ipv6)) || { ip -n "$a" -6 addr add fd93::1/64 dev "$va" nodad && ip -n "$b" -6 addr add fd93::2/64 dev "$vb" nodad; }; } &&
  ip -n "$a" link set "$va" up && ip -n "$b" link set "$vb" up &&
  ip -n "$a" link set lo up && ip -n "$b" link set lo up || { echo "cannot set up the veth link"; exit 1; }
if [[ -n $netem ]]; then
  ip netns exec "$a" tc qdisc add dev "$va" root netem $netem &&
    ip netns exec "$b" tc qdisc add dev "$vb" root netem $netem || { echo "tc netem $netem refused"; exit 77; }
fi
if [[ -n $impair ]]; then
  [[ -x ${IMPAIR_QUEUE:-} ]] || { echo "impair_queue not built (libnetfilter-queue-dev)"; exit 77; }
  command -v iptables >/dev/null || { echo "iptables not installed"; exit 77; }
  impair_pids=""
  for ns in "$a" "$b"; do
    ip netns exec "$ns" iptables -A OUTPUT -p udp --dport 4791 -j NFQUEUE --queue-num 7 --queue-bypass ||
      { echo "iptables refused the NFQUEUE rule"; exit 77; }
    ip netns exec "$ns" env -u LD_PRELOAD "$IMPAIR_QUEUE" 7 $impair >"$work/impair.$ns" 2>&1 &
    impair_pids+=" $!"
    for _ in $(seq 100); do grep -q ready "$work/impair.$ns" && break; sleep 0.05; done
    grep -q ready "$work/impair.$ns" || { echo "impair_queue did not start:"; cat "$work/impair.$ns"; exit 77; }
  done
fi
if [[ -n $dup ]]; then
  command -v nft >/dev/null || { echo "nft not installed"; exit 77; }
  for ns in "$a" "$b"; do
    peer=10.93.0.2
    [[ $ns == "$b" ]] && peer=10.93.0.1
    ip netns exec "$ns" nft -f - <<NFT || { echo "nft refused the dup rule"; exit 77; }
table ip copies {
  chain out {
    type filter hook output priority 0;
    udp dport 4791 numgen random mod 100 < $dup counter dup to $peer
  }
}
NFT
  done
fi
if [[ -n $drop ]]; then
  command -v nft >/dev/null || { echo "nft not installed"; exit 77; }
  for ns in "$a" "$b"; do
    ip netns exec "$ns" nft -f - <<NFT || { echo "nft refused the loss rule"; exit 77; }
table inet loss {
  chain out {
    type filter hook output priority 0;
    udp dport 4791 numgen random mod 100 < $drop counter drop
  }
}
NFT
  done
fi

. "$(dirname "$0")/two_hosts.sh"  # gid_of
ga=$(gid_of "$a" "$gid_a") gb=$(gid_of "$b" "$gid_b")
[[ -n $ga && -n $gb ]] || { echo "no GID for the veth addresses ($ga/$gb)"; ip netns exec "$a" ibv_devinfo -v; exit 1; }

if ((pcap)); then
  command -v tshark >/dev/null || { echo "tshark not installed"; exit 77; }
  # Our UDP GSO sends are cut into packets where the device cannot take them
  # whole; a veth takes them, and tshark would see one 64 KiB super-packet
  # (as with TCP TSO). Without the offload the kernel cuts them before the
  # capture point, as a NIC would on the wire.
  command -v ethtool >/dev/null || { echo "ethtool not installed"; exit 77; }
  ip netns exec "$a" ethtool -K "$va" tx-udp-segmentation off >/dev/null &&
    ip netns exec "$b" ethtool -K "$vb" tx-udp-segmentation off >/dev/null || { echo "ethtool refused"; exit 1; }
  # (Not under a sanitizer runtime that CI preloads for our library: tshark is not under test.)
  ip netns exec "$b" env -u LD_PRELOAD tshark -i "$vb" -f "udp port 4791" -w "$work/link.pcap" 2>"$work/tshark.err" &
  cap_pid=$!
  for _ in $(seq 100); do grep -q "Capturing on" "$work/tshark.err" && break; sleep 0.1; done
fi

if ((self_pcap)); then
  command -v tshark >/dev/null || { echo "tshark not installed"; exit 77; }
  export SOFTVERBS_PCAP=$work/self
fi
if [[ $kind == cm ]]; then
  # The CM between hosts: the server's listener is reachable once its
  # network mailbox exists (src/rdmacm/cm_network.cpp).
  server_addr=10.93.0.1 client_addr=10.93.0.2
  ((ipv6)) && server_addr=fd93::1 client_addr=fd93::2
  server_cmd=${server_cmd//@B/$client_addr} client_cmd=${client_cmd//@B/$client_addr}
  ip netns exec "$a" "$here/with_stacks.sh" 60 stdbuf -oL -eL ${server_cmd//@A/$server_addr} >"$work/server.0" 2>&1 &
  server=$!
  for _ in $(seq 200); do
    if [[ -n ${CM_READY:-} ]]; then  # ready once it says so (mckey: joined)
      grep -Eq -- "$CM_READY" "$work/server.0" && break
    elif [[ -n ${CM_NO_MADS:-} ]]; then  # ready once its UDP socket is bound (udpong: port 7174)
      ip netns exec "$a" ss -uln 2>/dev/null | grep -q ":7174 " && break
    else
      ip netns exec "$a" ss -xl 2>/dev/null | grep -q -- "-gsi-" && break
    fi
    kill -0 $server 2>/dev/null || break
    sleep 0.05
  done
  ip netns exec "$b" "$here/with_stacks.sh" 50 ${client_cmd//@A/$server_addr} >"$work/client.0" 2>&1
  client_rc=$?
  if [[ -n ${CM_SERVER_RUNS_FOREVER:-} || -n ${CM_CLIENT_FAILS:-} ]]; then
    # Still alive now means it survived the whole run: stopped, counted a pass.
    if kill $server 2>/dev/null; then wait $server; server_rc=0; else wait $server; server_rc=$?; fi
  else
    ((client_rc)) && kill -USR1 $server 2>/dev/null
    wait $server; server_rc=$?
  fi
  echo "--- server ($server_cmd): exit $server_rc"; cat "$work/server.0"
  echo "--- client ($client_cmd): exit $client_rc"; cat "$work/client.0"
  if [[ -n ${CM_CLIENT_FAILS:-} ]]; then
    ((client_rc)) || { echo "the client should have failed"; exit 1; }
    client_rc=0
  fi
  ((server_rc == 0 && client_rc == 0)) || exit 1
  [[ -z $expect ]] || grep -Eq -- "$expect" "$work/client.0" || { echo "client output does not match: $expect"; exit 1; }
  if [[ -n ${CM_UNEXPECTED:-} ]] && grep -Eq -- "$CM_UNEXPECTED" "$work/server.0" "$work/client.0"; then
    echo "output matches $CM_UNEXPECTED:"; grep -Eh -- "$CM_UNEXPECTED" "$work/server.0" "$work/client.0" | sort | uniq -c
    exit 1
  fi
  if ((pcap)); then  # the connection was made with CM MADs on the link
    sleep 0.5
    kill -INT "$cap_pid"; wait "$cap_pid" 2>/dev/null; cap_pid=""
    mads=$(env -u LD_PRELOAD tshark -r "$work/link.pcap" -Y "infiniband.bth.destqp == 1" -T fields -e frame.number 2>/dev/null | wc -l)
    echo "CM MADs on the link: $mads; $(env -u LD_PRELOAD tshark -r "$work/link.pcap" -Y "infiniband.bth.destqp == 1" 2>/dev/null | grep -oE 'CM: [A-Za-z]+' | sort | uniq -c | xargs)"
    if [[ -n ${CM_NO_MADS:-} ]]; then  # rsockets datagrams: UD QPs found through UDP, no CM
      filter="(infiniband.bth.opcode == 100 || infiniband.bth.opcode == 101)"  # UD SEND only (with immediate)
      [[ -n ${CM_MULTICAST:-} ]] && filter+=" && infiniband.bth.destqp == 0xffffff && ip.dst == $CM_MULTICAST"
      [[ -n ${CM_MULTICAST:-} && $CM_MULTICAST == *:* ]] && filter=${filter/ip.dst/ipv6.dst}
      ud=$(env -u LD_PRELOAD tshark -r "$work/link.pcap" -Y "$filter" -T fields -e frame.number 2>/dev/null | wc -l)
      echo "UD SENDs on the link ($filter): $ud"
      ((ud > 0)) || { echo "no UD SEND on the link: the datagrams did not travel between the hosts"; exit 1; }
    else
      ((mads > 0)) || { echo "no CM MAD on the link"; exit 1; }
    fi
    pcap=2  # checked below like any capture
  fi
fi
[[ $kind == cm ]] && pairs=0
flag=-g
[[ $kind == perftest ]] && flag=-x
# Each pair has its own TCP port for the tools' own exchange; with several,
# several processes of each host share the RoCE port (roce_forward.h).
declare -a servers clients
# (Counters at exit, not samples taken while the tools run: a client under
# ASan on a busy machine could start and end between two samples.)
((stats)) && export SOFTVERBS_STAT_AT_EXIT=1
[[ -n $faults ]] && export SOFTVERBS_FAULTS=$faults
((trace)) && export SOFTVERBS_TRACE=$work/timeline
for ((p = 0; p < pairs; p++)); do
  ip netns exec "$a" "$here/with_stacks.sh" 60 "$tool" "$flag" "$ga" -p $((18515 + p)) "$@" >"$work/server.$p" 2>&1 &
  servers[p]=$!
done
sleep 0.5
for ((p = 0; p < pairs; p++)); do
  ip netns exec "$b" "$here/with_stacks.sh" 60 "$tool" "$flag" "$gb" -p $((18515 + p)) "$@" "$addr_a" >"$work/client.$p" 2>&1 &
  clients[p]=$!
done
if [[ -n $live_faults ]]; then
  [[ -x ${SOFTVERBS_STAT_TOOL:-} ]] || { echo "SOFTVERBS_STAT_TOOL: the softverbs-stat binary"; exit 1; }
  sleep 1
  live_pid=$(env -u LD_PRELOAD pgrep -P "${clients[0]}" -x "$tool")  # (pgrep hangs under the ASan runtime CI preloads)
  ip netns exec "$b" "$SOFTVERBS_STAT_TOOL" -p "$live_pid" -f "$live_faults" || { echo "softverbs-stat -f failed"; exit 1; }
  faults=$live_faults  # (checked as if given from the start)
fi
failed=0
for ((p = 0; p < pairs; p++)); do
  wait "${clients[p]}"; client_rc=$?
  wait "${servers[p]}"; server_rc=$?
  ok=1
  ((client_rc || server_rc)) && ok=0
  if [[ $kind == pingpong ]]; then
    grep -q "iters in" "$work/client.$p" && grep -q "iters in" "$work/server.$p" || ok=0
  else
    grep -q "^ *#bytes" "$work/client.$p" || ok=0
  fi
  if ((!ok)); then
    echo "--- pair $p: server ($server_rc)"; cat "$work/server.$p"
    echo "--- pair $p: client ($client_rc)"; cat "$work/client.$p"
    failed=1
  else
    cat "$work/server.$p" "$work/client.$p" | grep -E "iters in|^ *[0-9]+ +[0-9]+ " | head -2
  fi
done
((failed)) && exit 1
if [[ -n $drop ]]; then
  total=0
  for ns in "$a" "$b"; do
    counts=$(ip netns exec "$ns" nft list chain inet loss out | grep -o 'packets [0-9]*')
    echo "$ns dropped: $(paste -sd ' ' <<<"$counts")"
    for n in $(grep -o '[0-9]*' <<<"$counts"); do total=$((total + n)); done
  done
  ((total > 0)) || { echo "the link dropped nothing: the run did not test recovery"; exit 1; }
fi

if [[ -n $faults ]]; then
  injected=$(cat "$work"/server.* "$work"/client.* | grep -c "fault injected: ")
  if [[ -n $live_faults ]] && ! grep -q "fault rules from outside: '$live_faults'" "$work/client.0"; then
    echo "the client did not say it took the rules from outside"; exit 1
  fi
  echo "faults logged ($faults): $injected"
  ((injected > 0)) || { echo "no fault was injected"; exit 1; }
fi
if ((trace)); then
  env -u LD_PRELOAD python3 - "$work" "${faults:+recovery}" <<'PY' || exit 1
import glob, json, sys
files = sorted(glob.glob(sys.argv[1] + "/timeline.*.json"))
print(f"timelines: {len(files)}")
ok = len(files) == 2
net = {}
counters = 0
for f in files:
    text = open(f).read()
    if not text.rstrip().endswith("]"):
        text += "\n]"
    for e in json.loads(text):
        if e.get("cat") == "net" and e["ph"] == "C":
            counters += 1
        elif e.get("cat") == "net":
            net[e["name"]] = net.get(e["name"], 0) + 1
print(f"packet counter samples: {counters}; engine events: {net}")
ok &= counters > 0
if sys.argv[2]:
    ok &= any(net.get(k) for k in ("retransmits", "seq_naks_sent", "probes", "ack_timeouts"))
sys.exit(0 if ok else 1)
PY
fi
if [[ -n $impair ]]; then
  kill -TERM $impair_pids 2>/dev/null
  wait $impair_pids 2>/dev/null
  impair_pids=""
  dropped=0
  for ns in "$a" "$b"; do
    counts=$(grep -E "^passed" "$work/impair.$ns")
    echo "$ns impair_queue$impair: $counts"
    [[ -n $counts ]] || { echo "impair_queue gave no counts:"; cat "$work/impair.$ns"; exit 1; }
    # (Random loss of every packet, --drop, must show on each host.)
    if [[ $impair == *--hold* && $counts == *" held 0 "* ]] || [[ " $impair " == *" --drop "* && $counts == *"dropped 0" ]]; then
      echo "the link was not impaired as asked"; exit 1
    fi
    dropped=$((dropped + ${counts##* }))
  done
  # (With --drop-data or --drop-naks one host may send no data, or no NAK:
  # the two together must drop.)
  [[ $impair == *--drop* ]] && ((dropped == 0)) && { echo "the link dropped nothing: the run did not test recovery"; exit 1; }
fi
if [[ -n $dup ]]; then
  for ns in "$a" "$b"; do
    n=$(ip netns exec "$ns" nft list chain ip copies out | grep -o 'packets [0-9]*' | grep -o '[0-9]*')
    echo "$ns duplicated: $n sends"
    duplicated=$(( ${duplicated:-0} + n ))
  done
  ((duplicated > 0)) || { echo "nothing was duplicated"; exit 1; }
fi

if ((stats)); then
  for ((p = 0; p < pairs; p++)); do
    # (-o: a tool may leave a line of its own unfinished when a QP's line comes)
    grep -ohE '^process [0-9]+ at exit$|  (device|QP 0x[0-9a-f]+) .*' "$work/server.$p" "$work/client.$p"
  done >"$work/stat"
  [[ -s $work/stat ]] || { echo "the tools printed no counters"; exit 1; }
  cat "$work/stat"
  grep -q "device .*packets_sent [1-9]" "$work/stat" && grep -q "QP 0x.*packets_received [1-9]" "$work/stat" ||
    { echo "no packets counted"; exit 1; }
  # Whoever received them said so: the polling application or the network thread.
  grep -Eq "device .*(app_receives|thread_receives) [1-9]" "$work/stat" || { echo "no receives counted"; exit 1; }
  if ((lossy)) && ! grep -Eq "(seq_naks_sent|ack_timeouts|retransmits) [1-9]" "$work/stat"; then
    echo "packets were dropped but no recovery was counted"; exit 1
  fi
  for counter in $expect_counter; do
    grep -q "device .*$counter [1-9]" "$work/stat" || { echo "the counter $counter never went above 0"; exit 1; }
  done
  if [[ -n $max_forwarded ]]; then
    read -r received forwarded < <(awk '$1 == "device" {
        for (i = 2; i < NF; i++) { if ($i == "packets_received") r += $(i + 1); if ($i == "forwarded") f += $(i + 1) } }
      END {print r + 0, f + 0}' "$work/stat")
    echo "packets received $received, forwarded to another process $forwarded"
    ((forwarded * 100 <= received * max_forwarded)) ||
      { echo "more than $max_forwarded % of the packets went through another process"; exit 1; }
  fi
  if [[ -n $drop_naks ]] && ! grep -q "device .*probes [1-9]" "$work/stat"; then
    echo "sequence NAKs were dropped but no loss probe was counted"; exit 1
  fi
fi

check_capture() {  # tshark decodes every packet of $1 as RoCE, none malformed; each ICRC recomputed
  env -u LD_PRELOAD python3 "$here/roce_pcap_check.py" "$1"
}

if ((pcap == 1)); then
  sleep 0.5
  kill -INT "$cap_pid"
  for _ in $(seq 100); do kill -0 "$cap_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$cap_pid" 2>/dev/null
  wait "$cap_pid" 2>/dev/null
  cap_pid=""
fi
if ((pcap)); then
  check_capture "$work/link.pcap" || exit 1
fi
if ((self_pcap)); then
  files=("$work"/self.*.pcap)
  [[ ${#files[@]} -ge 2 && -s ${files[0]} ]] || { echo "expected a capture per process: ${files[*]}"; exit 1; }
  for f in "${files[@]}"; do echo "$(basename "$f"):"; check_capture "$f" || exit 1; done
fi
exit 0
