#!/usr/bin/env bash
# An RC WRITE between two hosts (network namespaces this test creates,
# joined by a veth pair; deleted at the end) whose buffer the application
# gives up while the WRITE is still on the wire (rc_buffer_tool.c):
#  - dereg: the MR is deregistered and the buffer overwritten and unmapped
#    right after posting; the WRITE completes successfully and the target
#    holds the bytes the buffer had when it was deregistered
#  - flush: the QP is moved to the error state right after posting; after
#    the flush completion the buffer is unmapped (still registered) and
#    nothing reads it any more (no retransmission after the flush)
#  - range: the WRITE's last 4 KiB fall outside the target MR; it fails
#    with IBV_WC_REM_ACCESS_ERR, the target QP reports
#    IBV_EVENT_QP_ACCESS_ERR, and not one byte of the target was written
#  - unmap: the client unmaps the buffer right after posting without
#    deregistering it (a NIC reads the pinned pages all the same); the
#    WRITE completes successfully and the target holds the buffer's bytes
#  - unmapped: the same, and the server unmaps its registered target
#    buffer before the WRITE arrives; the WRITE and a SEND still land
# Skipped (77) without the right to create namespaces.
#   roce_buffers_netns.sh RC_BUFFER_TOOL
set -u
tool=$1
a=sv-buf-a-$$ b=sv-buf-b-$$ va=sv-bva$$ vb=sv-bvb$$
work=$(mktemp -d)
cleanup() {
  ip netns del "$a" 2>/dev/null
  ip netns del "$b" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
. "$(dirname "$0")/two_hosts.sh"
make_two_hosts 10.98.0 || exit
ga=$(gid_of "$a" ::ffff:10.98.0.1) gb=$(gid_of "$b" ::ffff:10.98.0.2)
[[ -n $ga && -n $gb ]] || fail "no RoCEv2 GIDs for the veth addresses"

for mode in dereg flush range unmap unmapped; do
  dir=$work/$mode
  mkdir -p "$dir"
  smode= cmode=$mode
  [[ $mode == range || $mode == unmapped ]] && smode=$mode
  [[ $mode == unmapped ]] && cmode=unmap
  ip netns exec "$a" timeout 60 "$tool" server "$dir" "$ga" $smode > "$dir/server.out" 2>&1 &
  server=$!
  ip netns exec "$b" timeout 60 "$tool" client "$dir" "$gb" "$cmode" > "$dir/client.out" 2>&1
  rc=$?
  echo "--- $mode: client (exit $rc)"; cat "$dir/client.out"
  if [[ $mode == flush ]]; then kill "$server" 2>/dev/null; fi
  wait "$server"
  src=$?
  echo "--- $mode: server (exit $src)"; cat "$dir/server.out"
  [[ $rc == 0 ]] || fail "$mode: the client failed (exit $rc; 139 is a crash)"
  if [[ $mode == dereg || $mode == unmap ]]; then
    [[ $src == 0 ]] && grep -q verified "$dir/server.out" || fail "$mode: the target did not get the buffer's bytes"
  fi
  if [[ $mode == unmapped ]]; then
    [[ $src == 0 ]] && grep -q survived "$dir/server.out" || fail "unmapped: the target did not survive (139: a crash)"
  fi
  if [[ $mode == range ]]; then
    [[ $src == 0 ]] && grep -q untouched "$dir/server.out" || fail "range: the target was written or not told"
  fi
done
echo "PASS"
