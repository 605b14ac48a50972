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

// Built once per work request on the requester's stack: no default member
// initializers (zero-filling it showed up in profiles); message_for() sets
// every field.
struct Message {
  ibv_qp_type qp_type;
  ibv_wr_opcode opcode;
  uint32_t src_qpn;
  uint32_t dst_qpn;         // the responder QP (for multicast: each member in turn)
  uint32_t qkey;            // UD: the Q_Key the message carries
  uint32_t imm;             // network order
  uint32_t xrc_srqn;        // XRC: the SRQ of the target's domain that receives it
  bool solicited;
  bool block_self_mcast;    // UD sender created with IBV_QP_CREATE_BLOCK_SELF_MCAST_LB
  const Destination* dst;   // addresses, route, traffic class, ... (dst->qpn/qkey unused)
  const Piece* pieces;      // SEND/WRITE payload
  uint32_t num_pieces;
  // The pieces are the application's registered memory (not inline data
  // copied into the send queue, not an ODP scratch buffer): they hold still
  // until the work request completes, so a transport may read them late.
  bool pieces_are_app_memory;
  uint64_t length;
  uint64_t remote_addr;     // WRITE/READ/atomics
  uint32_t rkey;
  uint64_t compare_add, swap;
  const Piece* sink;        // READ/atomic results land here
  uint32_t num_sink;
  uint64_t token;           // names the work request in a later answer (SendAnswers); opaque to transports
};

// The transports with acknowledgements: RC, and the sending side of XRC.
inline bool is_reliable(ibv_qp_type t) { return t == IBV_QPT_RC || t == IBV_QPT_XRC_SEND; }

// What the responder answered (the ACK/NAK of the wire protocol).
enum class Outcome {
  kAck,                // executed
  kDropped,            // UC/UD: discarded silently (no QP, no receive, wrong Q_Key)
  kNoResponse,         // RC: nothing will answer (no such QP, not ready, process gone)
  kRnr,                // RC: receiver not ready (no receive WQE posted)
  kRemoteAccess,       // NAK: remote access error (rkey, bounds, permission)
  kRemoteInvalid,      // NAK: invalid request (length, opcode)
  kRemoteOperational,  // NAK: remote operational error (responder's own fault)
  kPending,            // on the wire: the answer comes later (requester.h answer_from_network)
  kRetryExceeded,      // RC over the network: no ACK after retry_cnt retransmissions
  kRnrRetryExceeded,   // RC over the network: still RNR after rnr_retry waits
};

struct Response {
  Outcome outcome = Outcome::kAck;
  uint8_t rnr_timer = 0;  // for kRnr: the responder's min_rnr_timer code
};

}  // namespace sv
