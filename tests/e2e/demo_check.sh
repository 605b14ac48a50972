#!/usr/bin/env bash
# Runs the demo and checks what it printed, step by step. The output is
# streamed as it comes, so a hang shows where it stopped.
set -u
log=$(mktemp)
trap 'rm -f "$log"' EXIT
timeout 90 "$1" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "demo exited $rc"; exit 1; }
for expect in \
  '\[server\] receive completion: success, 31 bytes from QP 0x[0-9a-f]+: "hello from the client, by SEND"' \
  'immediate 42 \(success\); my buffer at \+1024 now holds "written by the client with RDMA WRITE"' \
  'RDMA READ from server .*: success: "server memory, fetched by RDMA READ"' \
  'RDMA WRITE with a wrong rkey: remote access error; QP is now in the error state' \
  '10000 iters in'; do
  grep -Eq "$expect" "$log" || { echo "missing: $expect"; exit 1; }
done
