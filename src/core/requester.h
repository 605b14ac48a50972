// The requester: executes a QP's send queue in order, one WQE at a time,
// through the transport that reaches the destination, and turns the
// responder's answer into a completion, a retry later, or the error state.
#pragma once

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

// Runs posted WQEs until the queue is empty or must wait. Holds sq_mu.
void run_send_queue_locked(Qp* qp);
// Scheduler entry point (takes sq_mu).
void resume_send_queue(Qp* qp);
// Completes every WQE not yet executed with IBV_WC_WR_FLUSH_ERR. Holds sq_mu.
void flush_send_queue_locked(Qp* qp);
// Completes every posted receive WQE with IBV_WC_WR_FLUSH_ERR.
void flush_recv_queue(Qp* qp);

}  // namespace sv
