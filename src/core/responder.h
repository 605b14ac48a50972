// The responder: what a NIC does when a message arrives at a QP. It runs in
// whichever process holds the message: over shared memory, the initiator
// itself, on the target's queues mapped from the target's arena; over the
// network, the target process, on its own queues. It checks the target QP's
// state, type, connection and Q_Key, takes a receive WQE (or checks the
// rkey), moves the bytes, writes the receive completion into the target's
// CQ and wakes the target if its CQ is armed.
#pragma once

#include "core/message.h"
#include "core/recv_queue.h"
#include "shm/layout.h"
#include "shm/peers.h"

namespace sv {

// `ahead`: the requester's read-ahead of the target's receive queue, kept
// between messages of one connection (recv_queue.h); null: none.
Response respond(shm::PeerTable& peers, const shm::Peer& owner, shm::QpShared& target, const Message& m,
                 RecvAhead* ahead = nullptr);

// One packet of an RDMA WRITE from the network, placed into the target's
// memory as it arrives, at `offset` into the range its message's RETH names
// (`m.remote_addr`, `m.rkey`, `m.length`), instead of being gathered until
// the last packet: one copy of the payload fewer. kAck when placed, or the
// answer respond() would give the message. The last packet then goes
// through respond() with no pieces, for the checks and the completion.
Response place_write_packet(shm::PeerTable& peers, const shm::Peer& owner, shm::QpShared& target, const Message& m,
                            uint64_t offset, const uint8_t* data, uint32_t len);

}  // namespace sv
