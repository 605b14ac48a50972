#!/usr/bin/env bash
# A process killed while its QP is attached to a multicast group leaves the
# membership behind; the next process in its registry slot makes a QP with
# the same number, attaches, detaches and destroys it: every call must
# succeed (ibv_destroy_qp said EBUSY: perftest's "Couldn't destroy all SEND
# resources", about 1 run in 8 late in a CI run, once slots were reused).
# usage: mcast_slot_reuse.sh <process_limit_tool> <mcast_member_tool>
set -u
limit_tool=$1 member_tool=$2
export SOFTVERBS_DOMAIN=mcreuse$$
trap 'rm -f /dev/shm/softverbs-mcreuse$$.v*' EXIT
# Every slot used once and free again: the next processes reuse dead slots.
"$limit_tool" 255 >/dev/null || { echo "could not fill the registry"; exit 1; }
"$member_tool" die || { echo "the first member could not attach"; exit 1; }
out=$("$member_tool" detach); rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: the slot's next process could not detach and destroy its QP"; exit 1; }
echo "PASS"
