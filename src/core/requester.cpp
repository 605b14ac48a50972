#include "core/requester.h"

#include <cstring>
#include <vector>

#include "core/context.h"
#include "core/ib_timers.h"
#include "core/deferred_sends.h"
#include "core/device_profile.h"
#include "core/faults.h"
#include "core/trace.h"
#include "core/limits.h"
#include "core/mr.h"
#include "core/mw.h"
#include "core/raw.h"
#include "core/qp.h"
#include "core/scheduler.h"
#include "core/transport.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/self_mem.h"

namespace sv {
namespace {

ibv_wc_opcode wc_opcode_of(ibv_wr_opcode op) {
  switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ:
      return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
      return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      return IBV_WC_FETCH_ADD;
    case IBV_WR_LOCAL_INV:
      return IBV_WC_LOCAL_INV;
    case IBV_WR_BIND_MW:
      return IBV_WC_BIND_MW;
    case IBV_WR_TSO:
      return IBV_WC_TSO;
    default:
      return IBV_WC_SEND;
  }
}

// An atomic whose local buffer cannot hold the original 64-bit value
// (IBV_WC_LOC_LEN_ERR when its turn comes).
bool atomic_too_short(const SendWqe& w) {
  return (w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) && w.length < 8;
}

// RDMA READ and atomics: they fetch from the responder into local memory,
// and count against the initiator depth (max_rd_atomic) and a fence.
bool writes_local_memory(ibv_wr_opcode op) {
  return op == IBV_WR_RDMA_READ || op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

// (Out of line and cold: finish_wqe stays as small as without a timeline.)
[[gnu::cold, gnu::noinline]] void trace_done(Qp* qp, uint64_t pos, uint64_t wr_id, ibv_wr_opcode op, uint64_t length,
                                             ibv_wc_status status) {
  trace::done(qp, pos, wr_id, op, length, status);
}

// Generates the completion of the WQE at `pos` (successful unsignaled WQEs
// generate none) and moves on. The WQE's fields come one by one: from the
// send queue's slot (complete_wqe), or for a work request run straight
// from ibv_post_send (execute_direct) from the request itself.
void finish_wqe(Qp* qp, uint64_t pos, uint64_t wr_id, ibv_wr_opcode op, uint64_t length, bool signaled,
                ibv_wc_status status) {
  if (status != IBV_WC_SUCCESS || signaled) {
    shm::CqeFields c{};
    c.wr_id = wr_id;
    c.status = status;
    c.opcode = wc_opcode_of(op);
    c.byte_len = static_cast<uint32_t>(length);
    c.qp_num = qp->qp_base.qp_num;
    c.vendor_err = status == IBV_WC_SUCCESS ? 0 : 0x100 + status;
    push_local(qp->scq, c, qp, pos);
  }
  qp->sq_exec = pos + 1;
  qp->resume_at_ns = 0;
  qp->retry_left = retry_budget(qp->attr.retry_cnt);
  qp->rnr_left = rnr_retry_budget(qp->attr.rnr_retry);
}

void complete_wqe(Qp* qp, uint64_t pos, const SendWqe& w, ibv_wc_status status) {
  // (A work request execute_direct finished is traced by post_send: the
  // direct path stays as it is without a timeline.)
  if (__builtin_expect(trace::g_on, 0)) trace_done(qp, pos, w.wr_id, w.opcode, w.length, status);
  finish_wqe(qp, pos, w.wr_id, w.opcode, w.length, w.signaled, status);
}

void complete(Qp* qp, uint64_t pos, ibv_wc_status status) { complete_wqe(qp, pos, qp->slot(pos), status); }

// A send error ends the WQE with `status`. RC QPs move to ERR; UC and UD
// QPs move to SQE, where only the send queue is flushed and receives go on
// (IBTA 10.3.1: "Send Queue Error" state).
void fail(Qp* qp, uint64_t pos, ibv_wc_status status) {
  SV_INFO("QP %#x: send WQE %lu completes with %s", qp->qp_base.qp_num, pos, ibv_wc_status_str(status));
  complete(qp, pos, status);
  if (is_reliable(qp->type))
    enter_error_locked(qp);
  else
    enter_send_queue_error_locked(qp);
}

// Results (RDMA READ, atomics) bound for local on-demand memory: they land in
// the QP's scratch buffer and are written back once the responder answered.
struct OdpWriteBack {
  struct Span {
    const uint8_t* scratch;
    uint64_t vaddr;
    uint32_t len;
  };
  Span spans[limits::kMaxSge];
  uint32_t count = 0;
};

// One SGE's memory, its lkey checked; see gather().
bool local_piece(Qp* qp, const ibv_sge& sg, unsigned need, bool pinned, Piece* piece, bool* odp) {
  MrView v;
  if (!read_mr(qp->ctx->host->arena().mr_table(), sg.lkey, &v) || v.pd != qp->pd_obj->id ||
      (v.access & need) != need || !v.covers(sg.addr, sg.length) || v.mw)  // a window's rkey is no lkey
    return false;
  if (__builtin_expect(v.path == shm::kMrOdp, 0)) {
    *odp = true;
    return true;
  }
  uint8_t* at = reinterpret_cast<uint8_t*>(v.owner_vaddr(sg.addr));
  if (pinned) {  // (overlay_at: null unless the MR is overlaid)
    const shm::Arena& arena = qp->ctx->host->arena();
    if (uint8_t* p = v.overlay_at(arena.base(), arena.size(), sg.addr, sg.length)) at = p;
  }
  *piece = Piece{at, sg.length};
  return true;
}

// Collects the local memory of the WQE's SGEs, checking each lkey. Sets
// *odp and stops at the first on-demand MR: gather_odp() takes over.
// `pinned`: pieces of overlaid MRs are given in this process's mapping of
// the arena pages behind them (MrView::overlay_at), for a transport that
// reads them late (RoCEv2 reads a message's payload as its packets go): an
// application that unmaps its buffer without deregistering it then sends
// what its pages held, as a NIC does from pinned pages, instead of
// faulting.
bool gather(Qp* qp, uint64_t pos, Piece* pieces, uint32_t* count, bool* odp, bool pinned = false) {
  SendWqe& w = qp->slot(pos);
  *count = 0;
  if (w.inlined) {
    if (w.length) pieces[(*count)++] = Piece{qp->inline_buf(pos), static_cast<uint32_t>(w.length)};
    return true;
  }
  const unsigned need = writes_local_memory(w.opcode) ? IBV_ACCESS_LOCAL_WRITE : 0;
  const ibv_sge* sg = qp->sges(pos);
  for (uint32_t i = 0; i < w.num_sge; ++i) {
    if (sg[i].length == 0) continue;
    if (!local_piece(qp, sg[i], need, pinned, &pieces[*count], odp)) return false;
    if (__builtin_expect(*odp, 0)) return true;
    ++*count;
  }
  return true;
}

// gather() for a WQE that uses on-demand memory, whose pages may be absent:
// those bytes go through the QP's scratch buffer, copied with /proc/self/mem
// (now for what is sent, after the answer for what is received), so an
// absent page fails the WQE instead of faulting the process.
bool gather_odp(Qp* qp, uint64_t pos, Piece* pieces, uint32_t* count, OdpWriteBack* back) {
  SendWqe& w = qp->slot(pos);
  const shm::MrEntry* table = qp->ctx->host->arena().mr_table();
  const bool sink = writes_local_memory(w.opcode);
  ibv_sge* sg = qp->sges(pos);
  MrView views[limits::kMaxSge];
  uint64_t scratch_bytes = 0;
  for (uint32_t i = 0; i < w.num_sge; ++i) {
    if (sg[i].length == 0) continue;
    if (!read_mr(table, sg[i].lkey, &views[i])) return false;  // checked by gather() a moment ago
    if (views[i].path == shm::kMrOdp) scratch_bytes += sg[i].length;
  }
  if (qp->odp_scratch.size() < scratch_bytes) qp->odp_scratch.resize(scratch_bytes);
  uint8_t* scratch = qp->odp_scratch.data();
  *count = 0;
  back->count = 0;
  for (uint32_t i = 0; i < w.num_sge; ++i) {
    if (sg[i].length == 0) continue;
    const uint64_t vaddr = views[i].owner_vaddr(sg[i].addr);
    uint8_t* at = reinterpret_cast<uint8_t*>(vaddr);
    if (views[i].path == shm::kMrOdp) {
      if (sink)
        back->spans[back->count++] = OdpWriteBack::Span{scratch, vaddr, sg[i].length};
      else if (!self_mem_read_as_mapped(scratch, vaddr, sg[i].length))
        return false;
      at = scratch;
      scratch += sg[i].length;
    }
    pieces[(*count)++] = Piece{at, sg[i].length};
  }
  return true;
}

bool write_back(const OdpWriteBack& back) {
  for (uint32_t i = 0; i < back.count; ++i)
    if (!self_mem_write_as_mapped(back.spans[i].vaddr, back.spans[i].scratch, back.spans[i].len)) return false;
  return true;
}

// A message to `d` from the QP, without what its work request says.
Message message_from(Qp* qp, uint64_t pos, const Destination& d) {
  Message m;
  m.qp_type = qp->type;
  m.src_qpn = qp->qp_base.qp_num;
  m.dst_qpn = d.qpn;
  m.qkey = d.qkey;
  m.xrc_srqn = qp->type == IBV_QPT_XRC_SEND ? qp->sq_xrc_srqn[pos & qp->sq_mask] : 0;
  m.block_self_mcast = qp->block_self_mcast;
  m.dst = &d;
  m.pieces = m.sink = nullptr;
  m.num_pieces = m.num_sink = 0;
  m.pieces_are_app_memory = false;
  m.compare_add = m.swap = 0;
  m.remote_addr = 0;
  m.rkey = 0;
  m.token = pos;
  return m;
}

Message message_for(Qp* qp, uint64_t pos, const SendWqe& w) {
  Message m = message_from(qp, pos, qp->type == IBV_QPT_UD ? qp->ud_dest(pos) : qp->peer);
  m.opcode = w.opcode;
  m.imm = w.imm;
  m.solicited = w.flags & IBV_SEND_SOLICITED;
  m.length = w.length;
  m.remote_addr = w.remote_addr;
  m.rkey = w.rkey;
  m.compare_add = w.compare_add;
  m.swap = w.swap;
  return m;
}

// Checks that only long messages, RDMA READs and atomics need. False when
// they ended the WQE (completed or failed) without sending it.
bool passes_rare_checks(Qp* qp, uint64_t pos, const SendWqe& w) {
  // Memory window binds and local invalidations are done here, on this
  // process's own MR table: nothing is sent.
  if (w.opcode == IBV_WR_BIND_MW || w.opcode == IBV_WR_LOCAL_INV) {
    ibv_wc_status st = w.opcode == IBV_WR_BIND_MW ? execute_bind(qp, w) : execute_local_invalidate(qp, w.imm);
    if (st == IBV_WC_SUCCESS)
      complete(qp, pos, st);
    else
      fail(qp, pos, st);
    return false;
  }
  if (w.length > device_profile().max_msg_sz) {
    fail(qp, pos, IBV_WC_LOC_LEN_ERR);
    return false;
  }
  // IBTA C10-93.1.1: a UD message longer than the port MTU is not sent,
  // and it is not an error either (rxe completes it successfully). The
  // limit is the MTU of the link the message crosses: 4096 (max_mtu) for
  // one that stays on this host (loopback's 65536-byte MTU), the link's
  // for one to the network, checked there (roce_sender.cpp), as the port's
  // active_mtu reports it for the host's first network interface.
  if (qp->type == IBV_QPT_UD && w.length > limits::kMtuBytes) {
    complete(qp, pos, IBV_WC_SUCCESS);
    return false;
  }
  if (atomic_too_short(w)) {
    fail(qp, pos, IBV_WC_LOC_LEN_ERR);
    return false;
  }
  // An initiator depth of 0 allows no RDMA READ or atomic in flight: such a
  // request could never be sent. A NIC would wait forever; we say why.
  if (writes_local_memory(w.opcode) && qp->attr.max_rd_atomic == 0) {
    fail(qp, pos, IBV_WC_LOC_QP_OP_ERR);
    return false;
  }
  return true;
}

// Acts on any answer but a plain ACK. False when the WQE must wait.
bool act_on_response(Qp* qp, uint64_t pos, Response r) {
  switch (r.outcome) {
    case Outcome::kAck:
    case Outcome::kDropped:
      complete(qp, pos, IBV_WC_SUCCESS);
      return true;
    case Outcome::kNoResponse: {
      if (!is_reliable(qp->type)) {
        complete(qp, pos, IBV_WC_SUCCESS);
        return true;
      }
      uint64_t now = monotonic_ns();
      if (qp->attr.timeout == 0) {  // no local ACK timeout: wait as long as it takes
        qp->resume_at_ns = now + kForeverRetryNs;
        return false;
      }
      if (qp->resume_at_ns == 0) {  // first attempt: wait one timeout before retrying
        qp->resume_at_ns = now + ack_timeout_ns(qp->attr.timeout);
        return false;
      }
      if (qp->retry_left == 0) {
        fail(qp, pos, IBV_WC_RETRY_EXC_ERR);
        return true;
      }
      --qp->retry_left;
      qp->resume_at_ns = now + ack_timeout_ns(qp->attr.timeout);
      return false;
    }
    case Outcome::kRnr:
      if (qp->rnr_left == 0) {
        fail(qp, pos, IBV_WC_RNR_RETRY_EXC_ERR);
        return true;
      }
      if (qp->rnr_left != 7) --qp->rnr_left;  // 7 means retry forever
      qp->resume_at_ns = monotonic_ns() + rnr_delay_ns(r.rnr_timer);
      return false;
    case Outcome::kRemoteAccess:
      fail(qp, pos, IBV_WC_REM_ACCESS_ERR);
      return true;
    case Outcome::kRemoteInvalid:
      fail(qp, pos, IBV_WC_REM_INV_REQ_ERR);
      return true;
    case Outcome::kRemoteOperational:
      fail(qp, pos, IBV_WC_REM_OP_ERR);
      return true;
    case Outcome::kRetryExceeded:
      fail(qp, pos, IBV_WC_RETRY_EXC_ERR);
      return true;
    case Outcome::kRnrRetryExceeded:
      fail(qp, pos, IBV_WC_RNR_RETRY_EXC_ERR);
      return true;
    case Outcome::kPending:
      qp->sq_sent = pos + 1;
      return false;
  }
  return true;
}

// A raw packet QP's SEND or TSO: the gathered bytes are a frame (or, for
// TSO, the payload behind the header copied at post time), sent on the
// QP's network interface.
bool execute_raw(Qp* qp, uint64_t pos) {
  const SendWqe& w = qp->slot(pos);
  Piece pieces[limits::kMaxSge];
  uint32_t n = 0;
  bool odp = false;
  OdpWriteBack back;
  if (!gather(qp, pos, pieces, &n, &odp) || (odp && !gather_odp(qp, pos, pieces, &n, &back))) {
    fail(qp, pos, IBV_WC_LOC_PROT_ERR);
    return true;
  }
  std::vector<uint8_t> bytes;
  bytes.reserve(w.length);
  for (uint32_t i = 0; i < n; ++i) bytes.insert(bytes.end(), pieces[i].addr, pieces[i].addr + pieces[i].len);
  ibv_wc_status st = w.opcode == IBV_WR_TSO
                         ? raw_send_tso(qp, qp->tso_hdr(pos), w.rkey, static_cast<uint16_t>(w.imm), bytes.data(),
                                        bytes.size(), w.flags)
                         : raw_send(qp, bytes.data(), bytes.size(), w.flags);
  if (st == IBV_WC_SUCCESS)
    complete(qp, pos, st);
  else
    fail(qp, pos, st);
  return true;
}

// The fault injected for the WQE at `pos` (SOFTVERBS_FAULTS), taken from
// the QP's list once it is due; none (success, not late) when there is none.
faults::CompletionFault take_injected(Qp* qp, uint64_t pos) {
  while (!qp->fault_wqes.empty() && qp->fault_wqes.front().first < pos)  // (flushed meanwhile)
    qp->fault_wqes.erase(qp->fault_wqes.begin());
  if (qp->fault_wqes.empty() || qp->fault_wqes.front().first != pos) return {};
  faults::CompletionFault& f = qp->fault_wqes.front().second;
  if (f.late_ns) {
    // Late: its turn, the first time it comes, sets when it may go; it
    // waits (resume_at_ns) until then.
    const uint64_t now = monotonic_ns();
    if (!f.due_ns) f.due_ns = now + f.late_ns;
    if (now < f.due_ns) return f;
  }
  const ibv_wc_status status = f.status;
  qp->fault_wqes.erase(qp->fault_wqes.begin());
  return faults::CompletionFault{status};
}

// The WQE's gathered memory, in the message: where a READ's bytes and an
// atomic's original value land (sink), or what is sent (pieces: the
// application's own memory unless inline or staged for on-demand paging).
void attach_pieces(Message* m, const SendWqe& w, Piece* pieces, uint32_t n, bool odp) {
  if (writes_local_memory(w.opcode)) {
    m->sink = pieces;
    m->num_sink = n;
  } else {
    m->pieces = pieces;
    m->num_pieces = n;
    m->pieces_are_app_memory = !w.inlined && !odp;
  }
}

// Executes the WQE at sq_exec. False when the queue must wait (retry later).
// The common case (a SEND or WRITE of at most one MTU that the peer
// acknowledges) takes the straight line; everything else branches off.
bool execute_next(Qp* qp) {
  const uint64_t pos = qp->sq_exec;
  if (__builtin_expect(faults::armed(), 0) && !qp->fault_wqes.empty()) {
    const faults::CompletionFault f = take_injected(qp, pos);
    if (f.due_ns) {  // not yet: run_send_queue_locked schedules the resume
      qp->resume_at_ns = f.due_ns;
      return false;
    }
    if (f.status != IBV_WC_SUCCESS) {
      fail(qp, pos, f.status);  // as the device's own error would: the QP to ERR, the rest flushed
      return true;
    }
  }
  if (__builtin_expect(qp->type == IBV_QPT_RAW_PACKET, 0)) return execute_raw(qp, pos);
  const SendWqe& w = qp->slot(pos);
  if ((w.length > limits::kMtuBytes || w.opcode >= IBV_WR_RDMA_READ) && !passes_rare_checks(qp, pos, w))
    return true;
  Message m = message_for(qp, pos, w);
  const bool late_reader = m.dst->route && m.dst->route->answers_later();
  Piece pieces[limits::kMaxSge];
  uint32_t n = 0;
  bool odp = false;
  OdpWriteBack back;
  if (!gather(qp, pos, pieces, &n, &odp, late_reader) || (odp && !gather_odp(qp, pos, pieces, &n, &back))) {
    fail(qp, pos, IBV_WC_LOC_PROT_ERR);
    return true;
  }
  attach_pieces(&m, w, pieces, n, odp);
  Transport* t = m.dst->route;
  if (__builtin_expect(t != nullptr, 1)) {
    Response r = t->deliver(m);
    if (__builtin_expect(r.outcome == Outcome::kAck, 1)) {
      if (__builtin_expect(back.count != 0, 0) && !write_back(back)) {
        fail(qp, pos, IBV_WC_LOC_PROT_ERR);
        return true;
      }
      complete(qp, pos, IBV_WC_SUCCESS);
      return true;
    }
    return act_on_response(qp, pos, r);
  }
  return act_on_response(qp, pos,
                         Response{is_reliable(qp->type) ? Outcome::kNoResponse : Outcome::kDropped, 0});
}

// Hands the WQE at sq_sent to the network while earlier ones are still on
// the wire. A SEND, WRITE, READ or atomic that goes to the network and
// passes its local checks goes ahead, as on a NIC:
// - READs and atomics while fewer than max_rd_atomic are on the wire (the
//   initiator depth the QP was given). They waited for the wire to empty
//   before: one READ at a time, so ib_read_bw -s 32768 between two hosts
//   ran at 1/latency (340 MB/s against 1340 for ib_write_bw), and with it
//   every rendezvous of UCX (get_zcopy) and the MPIs over it;
// - a WQE with IBV_SEND_FENCE only once no READ or atomic before it is on
//   the wire (ibv_post_send(3)).
// Anything else waits until the QP's WQEs on the wire are answered (and a
// WQE that fails its local checks gets its error when its turn comes).
bool pipeline_next(Qp* qp) {
  const uint64_t pos = qp->sq_sent;
  const SendWqe& w = qp->slot(pos);
  // (An injected completion waits for those before it: execute_next.)
  if (__builtin_expect(faults::armed(), 0) && !qp->fault_wqes.empty() && qp->fault_wqes.front().first == pos)
    return false;
  const bool fetch = writes_local_memory(w.opcode);
  if (!fetch && w.opcode != IBV_WR_SEND && w.opcode != IBV_WR_SEND_WITH_IMM && w.opcode != IBV_WR_SEND_WITH_INV &&
      w.opcode != IBV_WR_RDMA_WRITE && w.opcode != IBV_WR_RDMA_WRITE_WITH_IMM)
    return false;
  if (fetch || (w.flags & IBV_SEND_FENCE)) {
    uint32_t on_wire = 0;  // READs and atomics sent, not yet answered
    for (uint64_t p = qp->sq_exec; p < pos; ++p) on_wire += writes_local_memory(qp->slot(p).opcode);
    if ((w.flags & IBV_SEND_FENCE) && on_wire) return false;
    if (fetch && on_wire >= qp->attr.max_rd_atomic) return false;
  }
  if (w.length > device_profile().max_msg_sz || atomic_too_short(w)) return false;
  Piece pieces[limits::kMaxSge];
  uint32_t n = 0;
  bool odp = false;
  Message m = message_for(qp, pos, w);
  if (!m.dst->route || !m.dst->route->answers_later()) return false;
  if (!gather(qp, pos, pieces, &n, &odp, /*pinned=*/true) || odp) return false;
  attach_pieces(&m, w, pieces, n, /*odp=*/false);  // (odp was refused above)
  Response r = m.dst->route->deliver(m);
  if (r.outcome != Outcome::kPending) return false;  // not expected of an RC network transport
  qp->sq_sent = pos + 1;
  return true;
}

}  // namespace

DirectRun execute_direct(Qp* qp, uint64_t pos, const ibv_send_wr* wr, Response* answer) {
  if (qp->sq_exec != pos || qp->resume_at_ns || qp->state() != IBV_QPS_RTS) return DirectRun::kNotTaken;
  if (qp->type != IBV_QPT_RC && qp->type != IBV_QPT_UC) return DirectRun::kNotTaken;
  const ibv_wr_opcode op = wr->opcode;
  const bool atomic = op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
  // RDMA READ and atomics answer into local memory (`sink`). An initiator
  // depth of 0 allows none: the long way says so (passes_rare_checks).
  const bool fetches = op == IBV_WR_RDMA_READ || atomic;
  if (fetches ? qp->attr.max_rd_atomic == 0
              : op != IBV_WR_SEND && op != IBV_WR_SEND_WITH_IMM && op != IBV_WR_RDMA_WRITE &&
                    op != IBV_WR_RDMA_WRITE_WITH_IMM)
    return DirectRun::kNotTaken;
  Transport* t = qp->peer.route;
  if (!t || t->answers_later()) return DirectRun::kNotTaken;
  // The payload (or where a READ's bytes and an atomic's original value
  // land), from the work request: inline data straight from the
  // application's buffers (they are read before ibv_post_send returns, as
  // inline data must be), registered memory with its lkey checked. Anything
  // unusual goes the long way, which gives its error.
  Piece pieces[limits::kMaxSge];
  uint32_t n = 0;
  uint64_t length = 0;
  const bool inlined = (wr->send_flags & IBV_SEND_INLINE) && !fetches;  // (as post_send sets SendWqe::inlined)
  const unsigned need = fetches ? IBV_ACCESS_LOCAL_WRITE : 0;
  for (int i = 0; i < wr->num_sge; ++i) {
    const ibv_sge& sg = wr->sg_list[i];
    if (sg.length == 0) continue;
    length += sg.length;
    if (inlined) {
      pieces[n++] = Piece{reinterpret_cast<uint8_t*>(sg.addr), sg.length};
      continue;
    }
    bool odp = false;
    if (!local_piece(qp, sg, need, false, &pieces[n], &odp) || odp) return DirectRun::kNotTaken;
    ++n;
  }
  if (length > limits::kMtuBytes || (inlined && length > qp->cap.max_inline_data) || (atomic && length < 8))
    return DirectRun::kNotTaken;
  // The message as message_for() makes it of a queued WQE, built from the
  // work request itself: no SendWqe in between (one on the stack, written
  // field by field and read back in wider loads, stalled every message on
  // store forwarding).
  Message m = message_from(qp, pos, qp->peer);
  m.opcode = op;
  m.imm = wr->imm_data;
  m.solicited = wr->send_flags & IBV_SEND_SOLICITED;
  m.length = length;
  if (atomic) {
    m.remote_addr = wr->wr.atomic.remote_addr;
    m.rkey = wr->wr.atomic.rkey;
    m.compare_add = wr->wr.atomic.compare_add;
    m.swap = wr->wr.atomic.swap;
  } else if (op != IBV_WR_SEND && op != IBV_WR_SEND_WITH_IMM) {
    m.remote_addr = wr->wr.rdma.remote_addr;
    m.rkey = wr->wr.rdma.rkey;
  }
  if (fetches) {
    m.sink = pieces;
    m.num_sink = n;
  } else {
    m.pieces = pieces;
    m.num_pieces = n;
    m.pieces_are_app_memory = !inlined;
  }
  const Response r = t->deliver(m);
  if (__builtin_expect(r.outcome != Outcome::kAck, 0)) {
    *answer = r;
    return DirectRun::kAnswered;
  }
  finish_wqe(qp, pos, wr->wr_id, op, length, qp->sig_all || (wr->send_flags & IBV_SEND_SIGNALED), IBV_WC_SUCCESS);
  return DirectRun::kDone;
}

void answer_direct(Qp* qp, uint64_t pos, Response r) {
  // As execute_next() does with an answer; a WQE that must wait is
  // scheduled by run_send_queue_locked(), which ibv_post_send calls next.
  act_on_response(qp, pos, r);
}

void run_send_queue_locked(Qp* qp) {
  while (qp->sq_exec != qp->sq_tail) {
    if (qp->state() == IBV_QPS_ERR || qp->state() == IBV_QPS_SQE) {
      flush_send_queue_locked(qp);
      return;
    }
    if (qp->state() != IBV_QPS_RTS) return;  // SQD: hold until RTS again
    if (qp->on_network()) {  // more may follow them, or answer_from_network() goes on
      if (qp->sq_sent == qp->sq_tail || qp->sq_sent - qp->sq_exec >= kMaxPendingPerQp || !pipeline_next(qp)) return;
      continue;
    }
    if (qp->resume_at_ns && monotonic_ns() < qp->resume_at_ns) {
      if (!qp->scheduled) {
        qp->scheduled = true;
        schedule_resume(qp, qp->resume_at_ns);
      }
      return;
    }
    if (!execute_next(qp)) {
      if (qp->on_network()) continue;
      qp->scheduled = true;
      schedule_resume(qp, qp->resume_at_ns);
      return;
    }
  }
}

void answer_from_network(Qp* qp, uint64_t pos, Response r) {
  DeferSends after_unlock;  // (what the queue sends next leaves once sq_mu is let go)
  std::lock_guard g(qp->sq_mu);
  if (!qp->on_network() || qp->sq_exec != pos) return;  // flushed or reset meanwhile
  // (An RNR NAK never comes back from the network: the engine waits it
  // out and sends the message again itself, as a NIC does.)
  if (qp->state() != IBV_QPS_ERR && !act_on_response(qp, pos, r)) {
    if (!qp->scheduled) {  // an RNR NAK: try again once its timer ran out
      qp->scheduled = true;
      schedule_resume(qp, qp->resume_at_ns);
    }
    return;
  }
  run_send_queue_locked(qp);
}

void resume_send_queue(Qp* qp) {
  DeferSends after_unlock;
  std::lock_guard g(qp->sq_mu);
  qp->scheduled = false;
  run_send_queue_locked(qp);
}

void flush_send_queue_locked(Qp* qp) {
  // What is still on the wire is not sent again: once flushed, its buffers
  // are the application's again (and a QP in error sends nothing).
  if (qp->on_network()) qp->ctx->for_each_transport([qp](Transport& t) { t.drop_sends(qp->qp_base.qp_num); });
  while (qp->sq_exec != qp->sq_tail) {
    uint64_t pos = qp->sq_exec;
    complete(qp, pos, IBV_WC_WR_FLUSH_ERR);
  }
  qp->fault_wqes.clear();
}

void flush_recv_queue(Qp* qp) {
  if (qp->srq_obj || !qp->rq.shared()) return;
  const shm::Peer* self = qp->ctx->host->peers().get(qp->ctx->host->slot());
  if (!self) return;
  RecvWqeCopy w;
  while (take_recv_wqe(*self, qp->rq.shared(), &w)) {
    shm::CqeFields c{};
    c.wr_id = w.wr_id;
    c.status = IBV_WC_WR_FLUSH_ERR;
    c.opcode = IBV_WC_RECV;
    c.qp_num = qp->qp_base.qp_num;
    c.vendor_err = 0x100 + IBV_WC_WR_FLUSH_ERR;
    push_local(qp->rcq, c, nullptr, 0);
  }
}

}  // namespace sv
