#!/usr/bin/env bash
# SOFTVERBS_PCAP on the intra-host (shared-memory) path: one of Debian's
# tools as server and client on this host, both writing captures; the
# messages must be there as synthetic RoCEv2 frames that tshark decodes
# (nothing malformed, the expected opcodes), with correct ICRCs, PSNs that
# advance without gaps, and each request in one file only (the initiator's
# process writes the whole exchange: transport/shm_capture.h).
#   shm_pcap.sh EXPECT PORT pingpong|perftest TOOL [ARGS...]
#     EXPECT  comma-separated opcode names (fnmatch patterns) that must
#             appear, e.g. RC_SEND_FIRST,RC_ACKNOWLEDGE (roce_pcap_check.py)
# Exit 77 (skip) without tshark or the tool.
set -u
expect=$1 port=$2 kind=$3 tool=$4
shift 4
command -v tshark >/dev/null || { echo "tshark not installed"; exit 77; }
command -v "$tool" >/dev/null || { echo "$tool not installed"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
if [[ $kind == pingpong ]]; then
  gid=$("$here/../common/loopback_gid.sh") && [[ -n $gid ]] || { echo "no ::ffff:127.0.0.1 GID"; exit 1; }
fi
. "$here/server_client.sh"  # $out: removed at exit
export SOFTVERBS_PCAP=$out/cap
if [[ $kind == pingpong ]]; then
  run_server_client 100 "$port" "$tool" -p "$port" -g "$gid" "$@" || exit 1
  grep -q "iters in" "$out/client" && grep -q "iters in" "$out/server" || { echo "no iterations reported"; exit 1; }
else
  run_server_client 150 "$port" "$tool" -d softverbs0 -p "$port" "$@" || exit 1
  grep -Eq '^ *[0-9]+ +[0-9]+ +[0-9.]+' "$out/client" || { echo "no results row"; exit 1; }
fi
unset SOFTVERBS_PCAP
shopt -s nullglob
files=("$out"/cap.*.pcap)
# A process that only received over shared memory writes nothing (no file).
((${#files[@]} >= 1)) || { echo "no capture written"; ls -la "$out"; exit 1; }
python3 "$here/roce_pcap_check.py" --psn --disjoint --expect "$expect" "${files[@]}"
