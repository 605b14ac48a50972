// Retries that must happen later (RNR back-off, RC retransmit timeout) are
// run by one background thread that sleeps until the earliest deadline:
// a QP waiting out an RNR timer costs no CPU, even when the application
// sleeps in ibv_get_cq_event.
#pragma once

#include <cstdint>

namespace sv {

struct Qp;

// Runs resume_send_queue(qp) at (or after) `at_ns` (CLOCK_MONOTONIC).
void schedule_resume(Qp* qp, uint64_t at_ns);
// Cancels a pending resume and waits if one is running right now.
void cancel_resume(Qp* qp);

}  // namespace sv
