#include "core/responder.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/async_events.h"
#include "core/cq.h"
#include "core/grh.h"
#include "core/mr.h"
#include "core/mw.h"
#include "core/recv_queue.h"
#include "shm/host.h"
#include "core/target_memory.h"
#include "shm/registry.h"
#include "util/knobs.h"
#include "util/log.h"

namespace sv {
namespace {

bool can_receive(uint32_t state) {
  return state == IBV_QPS_RTR || state == IBV_QPS_RTS || state == IBV_QPS_SQD || state == IBV_QPS_SQE;
}

// No answer for RC (the requester will time out), silent loss otherwise.
Response lost(const Message& m) {
  return Response{is_reliable(m.qp_type) ? Outcome::kNoResponse : Outcome::kDropped, 0};
}

const shm::MrEntry* mr_table(const shm::Peer& owner) {
  return owner.at<shm::MrEntry>(owner.header()->mr_table);
}

// Scatters a byte stream into the SGEs of a receive WQE of the target.
class Scatter {
 public:
  Scatter(const shm::Peer& owner, uint32_t pd, const RecvWqeCopy& wqe) : owner_(owner), pd_(pd), wqe_(wqe) {}

  // Appends `len` bytes; false with `status` set when they do not fit or an
  // SGE is invalid.
  [[gnu::always_inline]] bool put(const uint8_t* src, uint64_t len) {
    while (len) {
      if (sge_ >= wqe_.num_sge) return fail(IBV_WC_LOC_LEN_ERR);
      const ibv_sge& s = wqe_.sge[sge_];
      if (off_ == 0 && !validate(s)) return false;
      uint64_t n = std::min<uint64_t>(len, s.length - off_);
      if (n && !write_to_mr(owner_, view_, s.addr + off_, src, n)) return fail(IBV_WC_LOC_PROT_ERR);
      src += n;
      len -= n;
      off_ += n;
      if (off_ == s.length) {
        ++sge_;
        off_ = 0;
      }
    }
    return true;
  }
  ibv_wc_status status() const { return status_; }

 private:
  [[gnu::always_inline]] bool validate(const ibv_sge& s) {
    if (s.length == 0) {
      ++sge_;
      return true;
    }
    const shm::MrEntry* table = mr_table(owner_);
    if (!table || !read_mr(table, s.lkey, &view_) || view_.pd != pd_ || !(view_.access & IBV_ACCESS_LOCAL_WRITE) ||
        !view_.covers(s.addr, s.length) || view_.mw)
      return fail(IBV_WC_LOC_PROT_ERR);
    return true;
  }
  bool fail(ibv_wc_status s) {
    status_ = s;
    return false;
  }

  const shm::Peer& owner_;
  uint32_t pd_;
  const RecvWqeCopy& wqe_;
  uint32_t sge_ = 0;
  uint64_t off_ = 0;
  MrView view_;
  ibv_wc_status status_ = IBV_WC_SUCCESS;
};

// The responder's QP goes to the error state; its owner acts on it at its
// next poll of the receive CQ (or post / query on that QP). Some errors are
// also reported as an async event (`event`), others only by the completion.
void flag_target_error(shm::PeerTable& peers, const shm::Peer& owner, shm::QpShared& t,
                       std::optional<ibv_event_type> event) {
  if (t.remote_error.exchange(1)) return;
  // (An XRC_RECV QP has no CQ: its owner sees the error at its next call on it.)
  if (t.recv_cq_off)
    if (shm::CqShared* cq = peer_cq(owner, t.recv_cq_off)) cq->attention.fetch_or(1, std::memory_order_release);
  if (event) raise_async(peers, owner, t.ctx_index, *event, shm::kAsyncQp, t.qpn);
}

shm::RecvQueueShared* receive_queue(const shm::Peer& owner, const shm::QpShared& t) {
  return peer_recv_queue(owner, t.srq_off ? t.srq_off : t.rq_off);
}

// Where a message's receive side is: the QP's own receive queue (or SRQ), CQ,
// PD and memory; for an XRC_RECV QP, those of the XRC SRQ the message names,
// whose process (`mem`) may be another process of the domain.
struct Rx {
  const shm::Peer* mem;  // the process whose queue, CQ and memory these are
  const shm::QpShared* t;
  shm::RecvQueueShared* xrc_srq;  // null: the QP's own
  uint64_t cq_off;
  uint32_t pd;
  uint32_t ctx_index;  // for the CQ's async events
  shm::RecvQueueShared* queue() const { return xrc_srq ? xrc_srq : receive_queue(*mem, *t); }
};

// The target QP went away while its message was being placed: its owner
// destroyed it (state RESET, or the block already reused for another QP)
// or the owning process (or an XRC SRQ's) exited. A NIC that has destroyed a QP drops what
// arrives for it, so the message is lost, not refused: the owner's
// teardown (the queue, CQ and MRs going after the QP) is not an error of
// the requester's. (srq_pingpong's last SENDs, which can follow the
// receiver's last count, met a deregistered MR and failed with
// IBV_WC_REM_OP_ERR under load.)
bool target_vanished(const shm::Peer& owner, const Rx& rx, const Message& m) {
  return !can_receive(rx.t->state.load(std::memory_order_acquire)) || rx.t->qpn != m.dst_qpn || !owner.alive() ||
         !rx.mem->alive();
}

[[gnu::always_inline]] inline void complete_receive(shm::PeerTable& peers, const Rx& rx, const shm::CqeFields& c) {
  shm::CqShared* cq = rx.cq_off ? peer_cq(*rx.mem, rx.cq_off) : nullptr;
  if (!cq) return;
  if (!push_shared(peers, *rx.mem, cq, c) && !cq->overrun.exchange(1))
    raise_async(peers, *rx.mem, rx.ctx_index, IBV_EVENT_CQ_ERR, shm::kAsyncCq, cq->cq_id);
}

// An rkey check: the MR exists, belongs to the QP's PD (XRC: the SRQ's),
// allows `access`, covers the range, and the QP allows remote `access` too.
[[gnu::always_inline]] inline bool check_rkey(const shm::Peer& owner, const shm::QpShared& t, const Rx& rx,
                                              uint32_t rkey, uint64_t addr, uint64_t len, unsigned access, MrView* v) {
  if (!(t.access_flags & access)) return false;
  const shm::MrEntry* table = mr_table(owner);
  if (!table || !read_mr(table, rkey, v) || v->pd != rx.pd || !(v->access & access) || !v->covers(addr, len))
    return false;
  // A type 2 memory window is reached only through the QP it is bound to.
  return shm::mw_type(v->mw) != IBV_MW_TYPE_2 || shm::mw_qpn(v->mw) == (t.qpn & 0xffffff);
}

// An armed SRQ whose queued WQEs fell below its limit tells its owner once.
void check_srq_limit(shm::PeerTable& peers, const shm::Peer& owner, shm::RecvQueueShared* q) {
  if (!q->is_srq) return;
  uint32_t limit = q->limit.load(std::memory_order_acquire);
  if (!limit) return;
  uint64_t tail = q->tail.load(std::memory_order_acquire), head = q->head.load(std::memory_order_acquire);
  uint64_t left = tail > head ? tail - head : 0;
  if (left < limit && q->limit.compare_exchange_strong(limit, 0))
    raise_async(peers, owner, q->ctx_index, IBV_EVENT_SRQ_LIMIT_REACHED, shm::kAsyncSrq, q->srqn);
}

[[gnu::always_inline]] inline shm::CqeFields receive_cqe(const shm::QpShared& t, const Rx& rx, const Message& m,
                                                         const RecvWqeCopy& w) {
  shm::CqeFields c{};
  c.wr_id = w.wr_id;
  // Tells the owner's poller the WQE is gone (the QP's own queue only: an
  // XRC SRQ is found through the message, not the QP).
  if (!rx.xrc_srq) c.rq_pos = static_cast<uint32_t>(w.pos + 1);
  c.status = IBV_WC_SUCCESS;
  c.qp_num = t.qpn;
  c.src_qp = m.src_qpn;
  if (knobs().infiniband) {
    c.slid = m.dst->slid;  // an IB port reports the sender's LID and SL
    c.sl = m.dst->sl;
  } else {
    c.sl = roce_l3_header_type(m.dst->sgid, m.dst->dgid);  // as mlx5 (grh.h)
  }
  c.solicited = m.solicited;
  if (m.opcode == IBV_WR_SEND_WITH_IMM || m.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
    c.wc_flags |= IBV_WC_WITH_IMM;
    c.imm_or_inv = m.imm;
  } else if (m.opcode == IBV_WR_SEND_WITH_INV) {
    c.wc_flags |= IBV_WC_WITH_INV;
    c.imm_or_inv = m.imm;  // the invalidated rkey
  }
  c.opcode = m.opcode == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
  return c;
}

[[gnu::always_inline]] inline Response respond_send(shm::PeerTable& peers, const shm::Peer& owner, shm::QpShared& t,
                                                    const Rx& rx, const Message& m, RecvAhead* ahead) {
  // SEND with Invalidate names a type 2 window bound to this QP; any other
  // rkey makes the request invalid (checked before a receive is consumed).
  if (m.opcode == IBV_WR_SEND_WITH_INV && !may_remote_invalidate(*rx.mem, t.qpn, rx.pd, m.imm)) {
    SV_INFO("responder QP %#x: SEND with invalidate of rkey %#x refused", t.qpn, m.imm);
    if (m.qp_type == IBV_QPT_UC) return Response{Outcome::kDropped, 0};
    flag_target_error(peers, owner, t, IBV_EVENT_QP_REQ_ERR);
    return Response{Outcome::kRemoteInvalid, 0};
  }
  shm::RecvQueueShared* q = rx.queue();
  RecvWqeCopy w;
  if (!q || !take_recv_wqe(*rx.mem, q, &w, ahead)) {
    if (is_reliable(m.qp_type)) return Response{Outcome::kRnr, static_cast<uint8_t>(t.min_rnr_timer)};
    return Response{Outcome::kDropped, 0};
  }
  shm::CqeFields c = receive_cqe(t, rx, m, w);
  // The receive buffers belong to the queue's PD (an SRQ's may differ from the QP's).
  Scatter s(*rx.mem, q->pd, w);
  bool ok = true;
  if (m.qp_type == IBV_QPT_UD) {
    uint8_t grh[kGrhBytes];
    build_grh(grh, m.dst->sgid, m.dst->dgid, m.dst->traffic_class, m.dst->hop_limit, m.dst->flow_label,
              static_cast<uint32_t>(m.length));
    ok = s.put(grh, kGrhBytes);
    c.wc_flags |= IBV_WC_GRH;
    c.byte_len = static_cast<uint32_t>(m.length + kGrhBytes);
  } else {
    c.byte_len = static_cast<uint32_t>(m.length);
  }
  for (uint32_t i = 0; ok && i < m.num_pieces; ++i) ok = s.put(m.pieces[i].addr, m.pieces[i].len);
  if (!ok && target_vanished(owner, rx, m)) return lost(m);
  if (!ok) c.status = s.status();
  if (ok && m.opcode == IBV_WR_SEND_WITH_INV) remote_invalidate(*rx.mem, m.imm);
  complete_receive(peers, rx, c);
  check_srq_limit(peers, *rx.mem, q);
  if (ok) return Response{Outcome::kAck, 0};
  SV_INFO("responder QP %#x: receive WQE failed with %s", t.qpn, ibv_wc_status_str(s.status()));
  if (m.qp_type == IBV_QPT_UD) return Response{Outcome::kAck, 0};  // UD: only the receiver sees it
  flag_target_error(peers, owner, t, std::nullopt);
  if (m.qp_type == IBV_QPT_UC) return Response{Outcome::kDropped, 0};
  return Response{s.status() == IBV_WC_LOC_LEN_ERR ? Outcome::kRemoteInvalid : Outcome::kRemoteOperational, 0};
}

// A WRITE whose rkey, range or access failed: UC drops it, RC answers
// "remote access error" and the target QP goes to the error state.
Response refuse_write(shm::PeerTable& peers, const shm::Peer& owner, shm::QpShared& t, const Rx& rx,
                      const Message& m) {
  if (target_vanished(owner, rx, m)) return lost(m);
  SV_INFO("responder QP %#x: RDMA WRITE rkey %#x [%#lx, +%lu) refused", t.qpn, m.rkey, m.remote_addr, m.length);
  if (m.qp_type == IBV_QPT_UC) return Response{Outcome::kDropped, 0};
  flag_target_error(peers, owner, t, IBV_EVENT_QP_ACCESS_ERR);
  return Response{Outcome::kRemoteAccess, 0};
}

[[gnu::always_inline]] inline Response respond_write(shm::PeerTable& peers, const shm::Peer& owner, shm::QpShared& t,
                                                     const Rx& rx, const Message& m, RecvAhead* ahead) {
  // WRITE with immediate consumes a receive WQE: check for one first, so an
  // RNR leaves the target memory untouched (intra-host; over the network
  // the earlier packets of a multi-packet one are already placed, as on rxe).
  shm::RecvQueueShared* q = nullptr;
  RecvWqeCopy w;
  bool with_imm = m.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  if (with_imm) {
    q = rx.queue();
    if (!q || !take_recv_wqe(*rx.mem, q, &w, ahead)) {
      if (is_reliable(m.qp_type)) return Response{Outcome::kRnr, static_cast<uint8_t>(t.min_rnr_timer)};
      return Response{Outcome::kDropped, 0};
    }
  }
  // (A WRITE from the network arrives with no pieces: its packets were
  // placed as they came, place_write_packet(); the range is checked again.)
  bool ok = true;
  if (m.length) {
    MrView v;
    ok = check_rkey(*rx.mem, t, rx, m.rkey, m.remote_addr, m.length, IBV_ACCESS_REMOTE_WRITE, &v);
    uint64_t at = m.remote_addr;
    for (uint32_t i = 0; ok && i < m.num_pieces; ++i) {
      ok = write_to_mr(*rx.mem, v, at, m.pieces[i].addr, m.pieces[i].len);
      at += m.pieces[i].len;
    }
  }
  if (!ok) return refuse_write(peers, owner, t, rx, m);
  if (with_imm) {
    shm::CqeFields c = receive_cqe(t, rx, m, w);
    c.byte_len = static_cast<uint32_t>(m.length);
    complete_receive(peers, rx, c);
    check_srq_limit(peers, *rx.mem, q);
  }
  return Response{Outcome::kAck, 0};
}

// A responder with no resources for RDMA READ and atomics (its
// max_dest_rd_atomic is 0) answers such requests with "invalid request".
Response refuse_without_resources(shm::PeerTable& peers, const shm::Peer& owner, shm::QpShared& t,
                                  const Message& m) {
  SV_INFO("responder QP %#x: %s with max_dest_rd_atomic 0", t.qpn,
          m.opcode == IBV_WR_RDMA_READ ? "RDMA READ" : "atomic");
  flag_target_error(peers, owner, t, IBV_EVENT_QP_REQ_ERR);
  return Response{Outcome::kRemoteInvalid, 0};
}

Response respond_read(shm::PeerTable& peers, const shm::Peer& owner, shm::QpShared& t, const Rx& rx,
                      const Message& m) {
  if (t.max_dest_rd_atomic == 0) return refuse_without_resources(peers, owner, t, m);
  bool ok = true;
  if (m.length) {
    MrView v;
    ok = check_rkey(*rx.mem, t, rx, m.rkey, m.remote_addr, m.length, IBV_ACCESS_REMOTE_READ, &v);
    uint64_t at = m.remote_addr;
    for (uint32_t i = 0; ok && i < m.num_sink; ++i) {
      ok = read_from_mr(*rx.mem, v, at, m.sink[i].addr, m.sink[i].len);
      at += m.sink[i].len;
    }
  }
  if (ok) return Response{Outcome::kAck, 0};
  if (target_vanished(owner, rx, m)) return lost(m);
  SV_INFO("responder QP %#x: RDMA READ rkey %#x [%#lx, +%lu) refused", t.qpn, m.rkey, m.remote_addr, m.length);
  flag_target_error(peers, owner, t, IBV_EVENT_QP_ACCESS_ERR);
  return Response{Outcome::kRemoteAccess, 0};
}

Response respond_atomic(shm::PeerTable& peers, const shm::Peer& owner, shm::QpShared& t, const Rx& rx,
                        const Message& m) {
  if (t.max_dest_rd_atomic == 0) return refuse_without_resources(peers, owner, t, m);
  if (m.remote_addr % 8) {  // atomics work on naturally aligned 64-bit words
    flag_target_error(peers, owner, t, IBV_EVENT_QP_REQ_ERR);
    return Response{Outcome::kRemoteInvalid, 0};
  }
  MrView v;
  uint64_t original = 0;
  if (!check_rkey(*rx.mem, t, rx, m.rkey, m.remote_addr, 8, IBV_ACCESS_REMOTE_ATOMIC, &v) ||
      !atomic_on_mr(*rx.mem, *peers.registry().header(), v, m.remote_addr, m.opcode, m.compare_add, m.swap,
                    &original)) {
    if (target_vanished(owner, rx, m)) return lost(m);
    SV_INFO("responder QP %#x: atomic rkey %#x at %#lx refused", t.qpn, m.rkey, m.remote_addr);
    flag_target_error(peers, owner, t, IBV_EVENT_QP_ACCESS_ERR);
    return Response{Outcome::kRemoteAccess, 0};
  }
  // The original value goes back to the requester's 8-byte local buffer.
  const auto* bytes = reinterpret_cast<const uint8_t*>(&original);
  uint32_t done = 0;
  for (uint32_t i = 0; i < m.num_sink && done < 8; ++i) {
    uint32_t n = std::min<uint32_t>(m.sink[i].len, 8 - done);
    std::memcpy(m.sink[i].addr, bytes + done, n);
    done += n;
  }
  return Response{Outcome::kAck, 0};
}

// The SRQ `srqn` of `owner` (the process its number names), or nullptr.
shm::RecvQueueShared* srq_of(const shm::Peer& owner, uint32_t srqn) {
  uint32_t idx = shm::qpn_index(srqn);
  if (idx >= shm::kMaxSrqs) return nullptr;
  auto* e = owner.at<shm::SrqSlotEntry>(owner.header()->srq_table + uint64_t{idx} * sizeof(shm::SrqSlotEntry));
  if (!e || e->srqn.load(std::memory_order_acquire) != srqn) return nullptr;
  shm::RecvQueueShared* q = peer_recv_queue(owner, e->shared_off.load(std::memory_order_acquire));
  return q && q->srqn == srqn ? q : nullptr;
}

// What every message goes through before its opcode is looked at: the QP
// can receive, is of the message's type and connected to its sender (UD:
// the Q_Key matches), and where its receive side is (`rx`). False, with
// the answer in *early, when the message goes no further.
[[gnu::always_inline]] inline bool admit(shm::PeerTable& peers, const shm::Peer& owner, shm::QpShared& t,
                                         const Message& m, Rx* rx, Response* early) {
  uint32_t state = t.state.load(std::memory_order_acquire);
  const bool xrc = t.type == IBV_QPT_XRC_RECV;
  const bool right_type = xrc ? m.qp_type == IBV_QPT_XRC_SEND : t.type == static_cast<uint32_t>(m.qp_type);
  // UD: a Q_Key violation is silently dropped; connected: not connected to us.
  const bool addressed = m.qp_type == IBV_QPT_UD ? t.qkey == m.qkey : t.dest_qpn == m.src_qpn;
  if (!can_receive(state) || !right_type || t.remote_error.load(std::memory_order_relaxed)) {
    *early = lost(m);
    return false;
  }
  // The first message to reach a QP that is still in RTR tells its owner
  // that the connection is up (IBV_EVENT_COMM_EST), as a NIC does.
  if (state == IBV_QPS_RTR && !t.established.load(std::memory_order_relaxed) && !t.established.exchange(1))
    raise_async(peers, owner, t.ctx_index, IBV_EVENT_COMM_EST, shm::kAsyncQp, t.qpn);
  if (!addressed) {
    *early = lost(m);
    return false;
  }
  *rx = Rx{&owner, &t, nullptr, t.recv_cq_off, t.pd, t.ctx_index};
  if (xrc) {
    // The SRQ the message names (in any process of the host) must be of
    // the QP's XRC domain; it then takes the place of the QP's receive
    // queue, CQ, PD and memory.
    const shm::Peer* srq_owner = peers.get(shm::srqn_owner(m.xrc_srqn));
    shm::RecvQueueShared* q = srq_owner ? srq_of(*srq_owner, m.xrc_srqn) : nullptr;
    if (!q || !q->xrcd_id || q->xrcd_id != t.xrcd_id) {
      SV_INFO("responder XRC QP %#x: SRQ %#x is not of its domain", t.qpn, m.xrc_srqn);
      flag_target_error(peers, owner, t, IBV_EVENT_QP_REQ_ERR);
      *early = Response{Outcome::kRemoteInvalid, 0};
      return false;
    }
    *rx = Rx{srq_owner, &t, q, q->cq_off, q->pd, q->ctx_index};
  }
  return true;
}

}  // namespace

Response respond(shm::PeerTable& peers, const shm::Peer& owner, shm::QpShared& t, const Message& m,
                 RecvAhead* ahead) {
  Rx rx{};
  // (A bool and an out-parameter, not std::optional<Response>: the optional
  // came back through the stack in pieces too small to forward, a stall
  // on every message that showed in profiles.)
  if (Response early; !admit(peers, owner, t, m, &rx, &early)) return early;
  switch (m.opcode) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
    case IBV_WR_SEND_WITH_INV:
      return respond_send(peers, owner, t, rx, m, ahead);
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      return respond_write(peers, owner, t, rx, m, ahead);
    case IBV_WR_RDMA_READ:
      return respond_read(peers, owner, t, rx, m);
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      return respond_atomic(peers, owner, t, rx, m);
    default:
      return Response{Outcome::kRemoteInvalid, 0};
  }
}

Response place_write_packet(shm::PeerTable& peers, const shm::Peer& owner, shm::QpShared& t, const Message& m,
                            uint64_t offset, const uint8_t* data, uint32_t len) {
  Rx rx{};
  if (Response early; !admit(peers, owner, t, m, &rx, &early)) return early;
  MrView v;
  // The whole range the RETH names is checked at every packet, so a bad
  // rkey or range is refused at the first packet with nothing written (as
  // rxe checks it at the first), and a deregistration between packets is
  // seen at the next.
  if (offset + len <= m.length &&
      check_rkey(*rx.mem, t, rx, m.rkey, m.remote_addr, m.length, IBV_ACCESS_REMOTE_WRITE, &v) &&
      write_to_mr(*rx.mem, v, m.remote_addr + offset, data, len))
    return Response{Outcome::kAck, 0};
  return refuse_write(peers, owner, t, rx, m);
}

}  // namespace sv
