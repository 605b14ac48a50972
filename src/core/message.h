// One message from a requester to a responder QP, as the NIC model sees it:
// what the wire would carry (opcode, addresses, immediate, payload), with the
// payload still in the requester's memory. Transports carry it; the
// responder (responder.h) executes it.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "core/pd.h"

namespace sv {

// A contiguous piece of the requester's memory (already lkey-checked).
struct Piece {
  uint8_t* addr;
  uint32_t len;
};

struct Message {
  ibv_qp_type qp_type = IBV_QPT_RC;
  ibv_wr_opcode opcode = IBV_WR_SEND;
  uint32_t src_qpn = 0;
  ibv_gid sgid{};
  Destination dst;          // dgid, qpn, and for UD the resolved Q_Key
  uint32_t imm = 0;         // network order
  bool solicited = false;
  const Piece* pieces = nullptr;  // SEND/WRITE payload
  uint32_t num_pieces = 0;
  uint64_t length = 0;
  uint64_t remote_addr = 0;  // WRITE/READ/atomics
  uint32_t rkey = 0;
  uint64_t compare_add = 0, swap = 0;
  const Piece* sink = nullptr;  // READ/atomic results land here
  uint32_t num_sink = 0;
};

// What the responder answered (the ACK/NAK of the wire protocol).
enum class Outcome {
  kAck,                // executed
  kDropped,            // UC/UD: discarded silently (no QP, no receive, wrong Q_Key)
  kNoResponse,         // RC: nothing will answer (no such QP, not ready, process gone)
  kRnr,                // RC: receiver not ready (no receive WQE posted)
  kRemoteAccess,       // NAK: remote access error (rkey, bounds, permission)
  kRemoteInvalid,      // NAK: invalid request (length, opcode)
  kRemoteOperational,  // NAK: remote operational error (responder's own fault)
};

struct Response {
  Outcome outcome = Outcome::kAck;
  uint8_t rnr_timer = 0;  // for kRnr: the responder's min_rnr_timer code
};

}  // namespace sv
