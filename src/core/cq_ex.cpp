// The extended CQ polling API (ibv_cq_ex): start_poll / next_poll /
// end_poll and the ibv_wc_read_* accessors, over the same rings as poll_cq.
#include <cerrno>

#include "core/cq.h"
#include "core/qp.h"
#include "util/c_boundary.h"
#include "util/clock.h"

namespace sv {
namespace {

Cq* cq_of(ibv_cq_ex* c) { return Cq::from(c); }

int load_current(Cq* cq) {
  if (!take_one(cq, &cq->current)) return ENOENT;
  cq->status = static_cast<ibv_wc_status>(cq->current.status);
  cq->wr_id = cq->current.wr_id;
  return 0;
}

int start_poll(ibv_cq_ex* c, ibv_poll_cq_attr* attr) {
  if (attr && attr->comp_mask) return EINVAL;
  Cq* cq = cq_of(c);
  // (An entry point from C: the network's progress may not throw through it.)
  if (!maybe_ready(cq)) (void)c_boundary::guarded(false, ENOMEM, [cq] { return ready_after_progress(cq); });
  if (cq->shared->attention.load(std::memory_order_relaxed)) handle_qp_attention(cq);  // (before poll_mu: poll_cq says why)
  lock_poll(cq);
  int rc = load_current(cq);
  if (rc) {
    cq->poll_mu.unlock();  // ENOENT: the caller must not call end_poll
    return rc;
  }
  cq->wallclock_offset_ns = static_cast<int64_t>(realtime_ns() - monotonic_ns());
  return 0;
}

int next_poll(ibv_cq_ex* c) { return load_current(cq_of(c)); }
void end_poll(ibv_cq_ex* c) { cq_of(c)->poll_mu.unlock(); }

ibv_wc_opcode read_opcode(ibv_cq_ex* c) { return static_cast<ibv_wc_opcode>(cq_of(c)->current.opcode); }
uint32_t read_vendor_err(ibv_cq_ex* c) { return cq_of(c)->current.vendor_err; }
uint32_t read_byte_len(ibv_cq_ex* c) { return cq_of(c)->current.byte_len; }
__be32 read_imm_data(ibv_cq_ex* c) { return cq_of(c)->current.imm_or_inv; }
uint32_t read_qp_num(ibv_cq_ex* c) { return cq_of(c)->current.qp_num; }
uint32_t read_src_qp(ibv_cq_ex* c) { return cq_of(c)->current.src_qp; }
unsigned int read_wc_flags(ibv_cq_ex* c) { return cq_of(c)->current.wc_flags; }
uint32_t read_slid(ibv_cq_ex* c) { return cq_of(c)->current.slid; }
uint8_t read_sl(ibv_cq_ex* c) { return cq_of(c)->current.sl; }
uint8_t read_dlid_path_bits(ibv_cq_ex* c) { return cq_of(c)->current.dlid_path_bits; }
uint64_t read_completion_ts(ibv_cq_ex* c) { return cq_of(c)->current.ts_ns; }
uint64_t read_completion_wallclock_ns(ibv_cq_ex* c) {
  Cq* cq = cq_of(c);
  return cq->current.ts_ns + cq->wallclock_offset_ns;
}
// The C-VLAN a raw packet QP stripped (carried in the slid field: LIDs
// mean nothing on Ethernet).
uint16_t read_cvlan(ibv_cq_ex* c) { return cq_of(c)->current.slid; }
// The tag of the flow that steered a raw frame here (0 when none did).
uint32_t read_flow_tag(ibv_cq_ex* c) {
  const shm::CqeFields& f = cq_of(c)->current;
  return f.flow_tagged ? f.imm_or_inv : 0;
}
// Not advertised (no tag matching on this device); answers "nothing"
// rather than crash a caller that reads it anyway.
void read_tm_info(ibv_cq_ex*, ibv_wc_tm_info* tm) { *tm = {}; }

}  // namespace

void install_cq_ex_ops(Cq* cq) {
  cq->start_poll = start_poll;
  cq->next_poll = next_poll;
  cq->end_poll = end_poll;
  cq->read_opcode = read_opcode;
  cq->read_vendor_err = read_vendor_err;
  cq->read_byte_len = read_byte_len;
  cq->read_imm_data = read_imm_data;
  cq->read_qp_num = read_qp_num;
  cq->read_src_qp = read_src_qp;
  cq->read_wc_flags = read_wc_flags;
  cq->read_slid = read_slid;
  cq->read_sl = read_sl;
  cq->read_dlid_path_bits = read_dlid_path_bits;
  cq->read_completion_ts = read_completion_ts;
  cq->read_cvlan = read_cvlan;
  cq->read_flow_tag = read_flow_tag;
  cq->read_tm_info = read_tm_info;
  cq->read_completion_wallclock_ns = read_completion_wallclock_ns;
}

}  // namespace sv
