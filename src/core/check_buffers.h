// SOFTVERBS_CHECK's buffer-reused (core/check.h): the bytes each send work
// request sends from memory are checksummed when it is posted, and
// compared with that memory again when ibv_poll_cq takes the completion
// that frees its send queue slot. A difference means the application wrote
// the buffer while the work request was outstanding: on a NIC, which reads
// the buffer whenever it gets to the work request, what leaves is either.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

namespace sv {
struct Qp;
}

namespace sv::check {

// Sizes the QP's records (at its creation, with the checks on).
void size_post_records(Qp* qp);
// Records what the work request posted at `pos` sends (under sq_mu).
void record_post(Qp* qp, uint64_t pos, const ibv_send_wr& wr);
// Compares the records of the QP's slots freed since the last call with
// the memory now; reports the first that differs.
void verify_freed(Qp* qp);

}  // namespace sv::check
