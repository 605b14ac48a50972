#!/usr/bin/env bash
# Registrations are held to RLIMIT_MEMLOCK as the kernel holds them
# (ib_umem_get): without CAP_IPC_LOCK, `ulimit -l 64` lets a 16 KiB MR
# through and refuses a 64 MiB one (and a move of the small one onto it)
# with ENOMEM; an on-demand MR pins nothing and passes; deregistering gives
# the budget back. With CAP_IPC_LOCK, or SOFTVERBS_MEMLOCK=ignore, all pass. (Not
# `ulimit -l unlimited`: a container's root may not raise its hard limit.)
# (It registered 64 MiB under `ulimit -l 64`: a program that passes here
# failed on a cluster.)
#   memlock.sh MEMLOCK_TOOL
set -u
tool=$1
((EUID == 0)) || { echo "needs root to drop CAP_IPC_LOCK and set limits"; exit 77; }
command -v setpriv >/dev/null || { echo "no setpriv"; exit 77; }
# Root without CAP_IPC_LOCK: gone from the bounding set, so exec does not give it back.
unprivileged=(setpriv --bounding-set=-ipc_lock --inh-caps=-ipc_lock)
fail=0
expect() {  # expect LABEL WANTED OUTPUT
  if [[ $3 == "$2" ]]; then echo "ok: $1"; else
    echo "FAIL: $1: wanted"; echo "$2" | sed 's/^/    /'; echo "  got"; echo "$3" | sed 's/^/    /'; fail=1
  fi
}
limited=$(printf '%s\n' "reg_small ok" "reg_big ENOMEM" "reg_odp ok" "rereg_grow ENOMEM" "reg_again ok")
all_ok=$(printf '%s\n' "reg_small ok" "reg_big ok" "reg_odp ok" "rereg_grow ok" "reg_again ok")
expect "ulimit -l 64 without CAP_IPC_LOCK" "$limited" "$(ulimit -l 64; "${unprivileged[@]}" "$tool")"
expect "ulimit -l 64 with CAP_IPC_LOCK" "$all_ok" "$(ulimit -l 64; "$tool")"
expect "SOFTVERBS_MEMLOCK=ignore" "$all_ok" "$(ulimit -l 64; SOFTVERBS_MEMLOCK=ignore "${unprivileged[@]}" "$tool")"
# The budget is the pages each MR spans, all MRs of the process together:
# 16 KiB fits in 20 KiB once, and again only after it is given back.
expect "ulimit -l 20: one small MR at a time" "$(printf '%s\n' "reg_small ok" "reg_big ENOMEM" "reg_odp ok" "rereg_grow ENOMEM" "reg_again ok")" \
  "$(ulimit -l 20; "${unprivileged[@]}" "$tool")"
exit $fail
