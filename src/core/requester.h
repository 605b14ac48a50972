// The requester: executes a QP's send queue in order, one WQE at a time,
// through the transport that reaches the destination, and turns the
// responder's answer into a completion, a retry later, or the error state.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "core/message.h"
#include "core/transport.h"

namespace sv {

struct Qp;

// The network's answer to the WQE at `pos` that a transport took with
// Outcome::kPending (takes sq_mu; ignored if that WQE is no longer waiting).
void answer_from_network(Qp* qp, uint64_t pos, Response r);

// A QP's answers from a transport that answers later: answer_from_network().
class QpSendAnswers final : public SendAnswers {
 public:
  explicit QpSendAnswers(Qp* qp) : qp_(qp) {}
  void answered(uint64_t token, Response r) override { answer_from_network(qp_, token, r); }

 private:
  Qp* qp_;
};

// ibv_post_send's short way, for the common case: a SEND, WRITE, RDMA READ
// or atomic of at most one MTU on an RC or UC QP in RTS with nothing queued
// before it, to a peer this process reaches synchronously (on this host). It runs from the
// work request itself, as the WQE would run a moment later from the send
// queue, without copying it there first. Holds sq_mu; `pos` is sq_tail.
//  kNotTaken: nothing was done; post the WQE the usual way.
//  kDone:     acknowledged and completed; sq_exec is pos + 1.
//  kAnswered: the responder answered `*answer` (an RNR, a NAK, no answer):
//             post the WQE the usual way, then answer_direct().
enum class DirectRun { kNotTaken, kDone, kAnswered };
DirectRun execute_direct(Qp* qp, uint64_t pos, const ibv_send_wr* wr, Response* answer);
void answer_direct(Qp* qp, uint64_t pos, Response r);

// Runs posted WQEs until the queue is empty or must wait. Holds sq_mu.
void run_send_queue_locked(Qp* qp);
// Scheduler entry point (takes sq_mu).
void resume_send_queue(Qp* qp);
// Completes every WQE not yet executed with IBV_WC_WR_FLUSH_ERR. Holds sq_mu.
void flush_send_queue_locked(Qp* qp);
// Completes every posted receive WQE with IBV_WC_WR_FLUSH_ERR.
void flush_recv_queue(Qp* qp);

}  // namespace sv
