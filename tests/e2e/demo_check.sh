#!/usr/bin/env bash
# Runs the demo and checks what it printed, step by step.
set -u
out=$("$1" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "demo exited $rc"; exit 1; }
for expect in \
  '\[server\] receive completion: success, 31 bytes from QP 0x[0-9a-f]+: "hello from the client, by SEND"' \
  'immediate 42 \(success\); my buffer at \+1024 now holds "written by the client with RDMA WRITE"' \
  'RDMA READ from server .*: success: "server memory, fetched by RDMA READ"' \
  'RDMA WRITE with a wrong rkey: remote access error; QP is now in the error state' \
  '10000 iters in'; do
  grep -Eq "$expect" <<<"$out" || { echo "missing: $expect"; exit 1; }
done
