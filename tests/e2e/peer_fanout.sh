#!/usr/bin/env bash
# One process sends to 200 peers of its host, each asleep on a completion
# channel (issue 39 item 2), with 4 TiB arenas (SOFTVERBS_ARENA_GB=4096):
# mapping each peer's whole arena filled the 128 TiB address space after
# ~31 peers, and the sends to the rest failed. What is mapped of a peer is
# now its tables and queues and the overlay windows it touches, and at most
# 128 doorbells stay open however many peers are rung.
#   peer_fanout.sh TOOL [PEERS]
set -u
tool=$1 peers=${2:-200}
export SOFTVERBS_DOMAIN=fanout$$ SOFTVERBS_ARENA_GB=4096
trap 'rm -f /dev/shm/softverbs-fanout$$*' EXIT
out=$(timeout 120 "$tool" "$peers" 2>&1)
rc=$?
echo "$out"
((rc == 0)) || { echo "FAIL: not every peer got its message (exit $rc)"; exit 1; }
line=$(grep '^peers ' <<<"$out")
read -r _ _ _ sent _ failed _ intact _ gib _ fds _ maps _ <<<"$line"
echo "arenas take $gib GiB of address space for $peers peers with 4 TiB arenas; $fds descriptors open"
# Our own arena (4 TiB) and, per peer, its tables and queues (4 GiB) and
# one 3 GiB overlay window: well under 128 TiB. All of every arena: 800 TiB.
((gib > 4096 && gib < 4096 + peers * 8)) || { echo "FAIL: $gib GiB of arenas mapped"; exit 1; }
# Doorbells: 128 at most stay open, not one per peer.
((fds < 128 + 64)) || { echo "FAIL: $fds descriptors open for $peers peers"; exit 1; }
echo "PASS"
