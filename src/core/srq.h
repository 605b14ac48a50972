// Shared receive queues.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>

#include "core/pd.h"
#include "core/recv_queue.h"
#include "util/private_heap.h"

namespace sv {

struct Srq : ibv_srq, PrivateHeapObject {
  static Srq* from(ibv_srq* s) { return static_cast<Srq*>(s); }
  Context* ctx = nullptr;
  Pd* pd_obj = nullptr;
  struct Xrcd* xrcd = nullptr;  // XRC SRQs: their domain
  struct Cq* cq = nullptr;      // XRC SRQs: where their receive completions go
  uint32_t srqn = 0;
  uint32_t index = 0;
  RecvQueue rq;
  uint32_t max_wr = 0, max_sge = 0;
  std::atomic<int> users{0};  // QPs attached: destroy fails with EBUSY
  uint32_t async_reported = 0;
};

// ibv_create_srq: attr->max_wr / max_sge are rounded up and written back.
// With `xrcd` (and its `cq`), an XRC SRQ of that domain.
Srq* create_srq(Pd* pd, ibv_srq_init_attr* attr, struct Xrcd* xrcd = nullptr,
                struct Cq* cq = nullptr);  // nullptr + errno
int modify_srq(Srq* srq, ibv_srq_attr* attr, int mask);
int query_srq(Srq* srq, ibv_srq_attr* attr);
int destroy_srq(Srq* srq);
int post_srq_recv(Srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad);

}  // namespace sv
