// The extended post API of ibv_qp_ex: ibv_wr_start, one ibv_wr_<op> per
// work request followed by its ibv_wr_set_* calls, then ibv_wr_complete (or
// ibv_wr_abort). Work requests are staged in the send queue and become
// visible to the requester only at wr_complete, all or nothing.
#include <cerrno>
#include <cstring>

#include "core/deferred_sends.h"
#include "core/faults.h"
#include "core/trace.h"
#include "core/mr.h"
#include "core/mw.h"
#include "core/qp.h"
#include "core/requester.h"

namespace sv {
namespace {

Qp* qp_of(ibv_qp_ex* q) { return Qp::from(q); }

void wr_start(ibv_qp_ex* q) {
  Qp* qp = qp_of(q);
  qp->sq_mu.lock();  // held until wr_complete / wr_abort, as the API requires
  qp->batch_tail = qp->sq_tail;
  qp->batch_cur = nullptr;
  qp->batch_error = 0;
  ibv_qp_state st = qp->state();
  if (st == IBV_QPS_RESET || st == IBV_QPS_INIT || st == IBV_QPS_RTR) qp->batch_error = EINVAL;
  if (int e = faults::call(faults::Call::kPostSend)) qp->batch_error = e;  // (ibv_wr_complete's, as ibv_post_send's)
}

// An entry point from C (the inline ibv_wr_complete): nothing escapes it,
// and sq_mu is let go whatever happens (util/c_boundary.h).
int wr_complete(ibv_qp_ex* q) {
  DeferSends after_unlock;  // (its end, which sends, comes after sq_mu's unlock below)
  Qp* qp = qp_of(q);
  int rc = qp->batch_error;
  if (!rc) {
    qp->sq_tail = qp->batch_tail;
    try {
      run_send_queue_locked(qp);
    } catch (...) {  // (the batch is posted; it runs on at the next post or poll)
    }
  }
  qp->batch_cur = nullptr;
  qp->sq_mu.unlock();
  return rc;
}

void wr_abort(ibv_qp_ex* q) {
  Qp* qp = qp_of(q);
  qp->batch_cur = nullptr;
  while (!qp->fault_wqes.empty() && qp->fault_wqes.back().first >= qp->sq_tail) qp->fault_wqes.pop_back();
  qp->sq_mu.unlock();
}

// Starts a new WQE of `op` in the batch, or records why it cannot.
SendWqe* begin(ibv_qp_ex* q, ibv_wr_opcode op, uint64_t needed_flag) {
  Qp* qp = qp_of(q);
  qp->batch_cur = nullptr;
  if (qp->batch_error) return nullptr;
  if (!(qp->send_ops_flags & needed_flag)) {
    qp->batch_error = EOPNOTSUPP;
    return nullptr;
  }
  if (qp->batch_tail - qp->sq_head.load(std::memory_order_acquire) >= qp->cap.max_send_wr) {
    qp->batch_error = ENOMEM;
    return nullptr;
  }
  // Every field the requester reads for `op`, set here or by the wr_<op>
  // and wr_set_* calls (an assignment of a whole SendWqe{} showed up in
  // profiles).
  SendWqe& w = qp->slot(qp->batch_tail);
  w.wr_id = q->wr_id;
  w.length = 0;
  w.opcode = op;
  w.flags = q->wr_flags;
  w.imm = 0;
  w.num_sge = 0;
  w.signaled = qp->sig_all || (q->wr_flags & IBV_SEND_SIGNALED);
  w.inlined = false;
  if (faults::CompletionFault injected; faults::completion_fault(qp->qp_base.qp_num, op, &injected))
    qp->fault_wqes.emplace_back(qp->batch_tail, injected);
  if (__builtin_expect(trace::g_on, 0)) trace::posted(qp, qp->batch_tail);
  if (qp->type == IBV_QPT_UD) qp->ud_dest(qp->batch_tail) = Destination{};  // until wr_set_ud_addr
  qp->batch_cur = &w;
  ++qp->batch_tail;
  return &w;
}

uint64_t cur_pos(Qp* qp) { return qp->batch_tail - 1; }

void wr_send(ibv_qp_ex* q) { begin(q, IBV_WR_SEND, IBV_QP_EX_WITH_SEND); }
void wr_send_imm(ibv_qp_ex* q, __be32 imm) {
  if (SendWqe* w = begin(q, IBV_WR_SEND_WITH_IMM, IBV_QP_EX_WITH_SEND_WITH_IMM)) w->imm = imm;
}
void wr_rdma_write(ibv_qp_ex* q, uint32_t rkey, uint64_t addr) {
  if (SendWqe* w = begin(q, IBV_WR_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE)) {
    w->rkey = rkey;
    w->remote_addr = addr;
  }
}
void wr_rdma_write_imm(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, __be32 imm) {
  if (SendWqe* w = begin(q, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)) {
    w->rkey = rkey;
    w->remote_addr = addr;
    w->imm = imm;
  }
}
void wr_rdma_read(ibv_qp_ex* q, uint32_t rkey, uint64_t addr) {
  if (SendWqe* w = begin(q, IBV_WR_RDMA_READ, IBV_QP_EX_WITH_RDMA_READ)) {
    w->rkey = rkey;
    w->remote_addr = addr;
  }
}

void wr_atomic_cmp_swp(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, uint64_t compare, uint64_t swap) {
  if (SendWqe* w = begin(q, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP)) {
    w->rkey = rkey;
    w->remote_addr = addr;
    w->compare_add = compare;
    w->swap = swap;
  }
}
void wr_atomic_fetch_add(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, uint64_t add) {
  if (SendWqe* w = begin(q, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)) {
    w->rkey = rkey;
    w->remote_addr = addr;
    w->compare_add = add;
  }
}

void wr_send_inv(ibv_qp_ex* q, uint32_t invalidate_rkey) {
  if (SendWqe* w = begin(q, IBV_WR_SEND_WITH_INV, IBV_QP_EX_WITH_SEND_WITH_INV)) w->imm = invalidate_rkey;
}
void wr_local_inv(ibv_qp_ex* q, uint32_t invalidate_rkey) {
  if (SendWqe* w = begin(q, IBV_WR_LOCAL_INV, IBV_QP_EX_WITH_LOCAL_INV)) w->imm = invalidate_rkey;
}
// The window, MR and range travel in the WQE's own fields (as post_send
// stores them); no SGE follows.
void wr_bind_mw(ibv_qp_ex* q, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* info) {
  Qp* qp = qp_of(q);
  SendWqe* w = begin(q, IBV_WR_BIND_MW, IBV_QP_EX_WITH_BIND_MW);
  if (!w) return;
  if (!mw || !info) {
    qp->batch_error = EINVAL;
    return;
  }
  w->compare_add = reinterpret_cast<uint64_t>(Mw::from(mw));
  w->swap = reinterpret_cast<uint64_t>(info->mr ? Mr::from(info->mr) : nullptr);
  w->remote_addr = info->addr;
  w->length = info->length;
  w->rkey = rkey;
  w->imm = info->mw_access_flags;
  qp->batch_cur = nullptr;  // no wr_set_sge* may follow
}

void wr_send_tso(ibv_qp_ex* q, void* hdr, uint16_t hdr_sz, uint16_t mss) {
  Qp* qp = qp_of(q);
  SendWqe* w = begin(q, IBV_WR_TSO, IBV_QP_EX_WITH_TSO);
  if (!w) return;
  if (!hdr || !mss || hdr_sz > qp->max_tso_header) {
    qp->batch_error = EINVAL;
    return;
  }
  std::memcpy(qp->tso_hdr(cur_pos(qp)), hdr, hdr_sz);
  w->rkey = hdr_sz;
  w->imm = mss;
}

// Operations the device does not offer (not in send_ops_supported_for()): creating a
// QP that asks for them fails with EOPNOTSUPP or EINVAL, so these only run if an
// application calls a pointer it did not ask for.
void unsupported(ibv_qp_ex* q) {
  Qp* qp = qp_of(q);
  qp->batch_cur = nullptr;
  if (!qp->batch_error) qp->batch_error = EOPNOTSUPP;
}
void wr_atomic_write(ibv_qp_ex* q, uint32_t, uint64_t, const void*) { unsupported(q); }

void wr_set_xrc_srqn(ibv_qp_ex* q, uint32_t remote_srqn) {
  Qp* qp = qp_of(q);
  if (!qp->batch_cur) return;
  if (qp->type != IBV_QPT_XRC_SEND) {
    qp->batch_error = EINVAL;
    return;
  }
  qp->sq_xrc_srqn[cur_pos(qp) & qp->sq_mask] = remote_srqn;
}

void wr_set_ud_addr(ibv_qp_ex* q, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  Qp* qp = qp_of(q);
  SendWqe* w = qp->batch_cur;
  if (!w) return;
  if (qp->type != IBV_QPT_UD || !ah) {
    qp->batch_error = EINVAL;
    return;
  }
  Destination& d = qp->ud_dest(cur_pos(qp));
  d = Ah::from(ah)->dest;
  d.qpn = remote_qpn;
  d.qkey = (remote_qkey & 0x80000000u) ? qp->attr.qkey : remote_qkey;
}

void wr_set_sge_list(ibv_qp_ex* q, size_t n, const ibv_sge* list) {
  Qp* qp = qp_of(q);
  SendWqe* w = qp->batch_cur;
  if (!w) return;
  if (n > qp->cap.max_send_sge) {
    qp->batch_error = EINVAL;
    return;
  }
  w->inlined = false;
  w->num_sge = static_cast<uint32_t>(n);
  w->length = 0;
  ibv_sge* dst = qp->sges(cur_pos(qp));
  for (size_t i = 0; i < n; ++i) {
    dst[i] = list[i];
    w->length += list[i].length;
  }
}

void wr_set_sge(ibv_qp_ex* q, uint32_t lkey, uint64_t addr, uint32_t length) {
  ibv_sge s{addr, length, lkey};
  wr_set_sge_list(q, 1, &s);
}

void wr_set_inline_data_list(ibv_qp_ex* q, size_t n, const ibv_data_buf* bufs) {
  Qp* qp = qp_of(q);
  SendWqe* w = qp->batch_cur;
  if (!w) return;
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) total += bufs[i].length;
  if (total > qp->cap.max_inline_data) {
    qp->batch_error = EINVAL;
    return;
  }
  uint8_t* dst = qp->inline_buf(cur_pos(qp));
  for (size_t i = 0; i < n; ++i) {
    if (!bufs[i].length) continue;
    std::memcpy(dst, bufs[i].addr, bufs[i].length);
    dst += bufs[i].length;
  }
  w->inlined = true;
  w->num_sge = 0;
  w->length = total;
}

void wr_set_inline_data(ibv_qp_ex* q, void* addr, size_t length) {
  ibv_data_buf b{addr, length};
  wr_set_inline_data_list(q, 1, &b);
}

}  // namespace

void install_qp_ex_ops(Qp* qp) {
  qp->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
  qp->wr_atomic_fetch_add = wr_atomic_fetch_add;
  qp->wr_bind_mw = wr_bind_mw;
  qp->wr_local_inv = wr_local_inv;
  qp->wr_rdma_read = wr_rdma_read;
  qp->wr_rdma_write = wr_rdma_write;
  qp->wr_rdma_write_imm = wr_rdma_write_imm;
  qp->wr_send = wr_send;
  qp->wr_send_imm = wr_send_imm;
  qp->wr_send_inv = wr_send_inv;
  qp->wr_send_tso = wr_send_tso;
  qp->wr_set_ud_addr = wr_set_ud_addr;
  qp->wr_set_xrc_srqn = wr_set_xrc_srqn;
  qp->wr_set_inline_data = wr_set_inline_data;
  qp->wr_set_inline_data_list = wr_set_inline_data_list;
  qp->wr_set_sge = wr_set_sge;
  qp->wr_set_sge_list = wr_set_sge_list;
  qp->wr_start = wr_start;
  qp->wr_complete = wr_complete;
  qp->wr_abort = wr_abort;
  qp->wr_atomic_write = wr_atomic_write;
}

}  // namespace sv
