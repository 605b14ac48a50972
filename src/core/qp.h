// Queue pairs. The send queue lives in this process only (the initiator does
// all the work of a send); the receive queue and what peers must know about
// the QP (state, type, Q_Key, PD, connected QPN) live in the arena.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/faults.h"
#include "core/ib_timers.h"
#include "core/cq.h"
#include "core/pd.h"
#include "core/recv_queue.h"
#include "core/requester.h"
#include "core/srq.h"
#include "shm/layout.h"
#include "util/spin_lock.h"
#include "util/private_heap.h"

namespace sv {

// One posted work request: one cache line (a UD destination is kept
// beside it, in Qp::sq_ud). Its SGEs and inline data sit in their own arrays.
struct alignas(64) SendWqe {
  uint64_t wr_id = 0;
  uint64_t length = 0;
  uint64_t remote_addr = 0;
  uint64_t compare_add = 0, swap = 0;
  ibv_wr_opcode opcode = IBV_WR_SEND;
  uint32_t flags = 0;  // ibv_send_flags
  uint32_t imm = 0;    // imm_data (network order) or invalidate rkey
  uint32_t num_sge = 0;
  uint32_t rkey = 0;
  bool signaled = false;
  bool inlined = false;
};
static_assert(sizeof(SendWqe) == 64);

struct Qp : ibv_qp_ex, PrivateHeapObject {
  static Qp* from(ibv_qp* q) { return static_cast<Qp*>(reinterpret_cast<ibv_qp_ex*>(q)); }
  static Qp* from(ibv_qp_ex* q) { return static_cast<Qp*>(q); }
  ibv_qp* ibv() { return &qp_base; }

  Context* ctx = nullptr;
  Pd* pd_obj = nullptr;
  Cq* scq = nullptr;
  Cq* rcq = nullptr;
  Srq* srq_obj = nullptr;
  struct Xrcd* xrcd = nullptr;  // XRC_RECV: its domain
  // An ibv_open_qp handle (qp_open.cpp): the QP it names, and that QP's
  // object when it lives in this process.
  shm::QpShared* opened_shared = nullptr;
  Qp* opened_from = nullptr;

  // Raw packet QPs (raw.h): the port they are attached to, their flows,
  // what they do to frames, and for RSS QPs the indirection table and hash.
  void* raw_port = nullptr;
  std::atomic<int> flows{0};
  bool scatter_fcs = false, cvlan_strip = false;
  uint32_t max_tso_header = 0;
  PrivateVector<uint8_t> sq_tso_hdr;  // max_tso_header bytes per slot
  struct RwqIndTable* ind_table = nullptr;
  PrivateVector<uint8_t> rss_key;
  uint64_t rss_fields = 0;
  uint32_t index = 0;
  uint64_t shared_off = 0;
  shm::QpShared* shared = nullptr;
  RecvQueue rq;  // unused with an SRQ

  ibv_qp_type type = IBV_QPT_RC;
  ibv_qp_cap cap{};
  bool sig_all = false;
  bool block_self_mcast = false;  // IBV_QP_CREATE_BLOCK_SELF_MCAST_LB
  uint64_t send_ops_flags = 0;
  ibv_qp_attr attr{};  // what ibv_query_qp reports; attr.qp_state is the truth

  // Send queue. Slots [sq_head, sq_exec) are executed but not yet released
  // by a polled completion; [sq_exec, sq_tail) wait to be executed.
  SpinLock sq_mu;
  PrivateVector<SendWqe> sq;
  PrivateVector<ibv_sge> sq_sges;      // cap.max_send_sge per slot
  PrivateVector<uint8_t> sq_inline;    // cap.max_inline_data per slot
  PrivateVector<Destination> sq_ud;    // UD: each slot's destination (AH and WR)
  PrivateVector<uint8_t> odp_scratch;  // bytes of on-demand MRs in transit (requester.cpp)
  PrivateVector<uint32_t> sq_xrc_srqn;   // XRC_SEND: each slot's remote SRQ number
  // Send queue positions whose work requests complete with an injected
  // status or late (SOFTVERBS_FAULTS' wc= and late= rules, core/faults.h).
  // Under sq_mu.
  PrivateVector<std::pair<uint64_t, faults::CompletionFault>> fault_wqes;
  // When each send queue slot's work request was posted (SOFTVERBS_TRACE,
  // core/trace.h; empty without it).
  PrivateVector<uint64_t> trace_posted;
  // SOFTVERBS_CHECK's buffer-reused (core/check.h): per send queue slot,
  // a checksum of the bytes its work request sends (0 SGEs: none kept),
  // and its SGEs; checked up to this position so far. Empty without it.
  struct CheckedWr {
    uint32_t sum = 0;
    uint32_t num_sge = 0;
    uint64_t wr_id = 0;
  };
  PrivateVector<CheckedWr> check_wrs;
  PrivateVector<ibv_sge> check_sges;
  uint64_t check_verified = 0;
  uint64_t sq_mask = 0;
  std::atomic<uint64_t> sq_head{0};
  uint64_t sq_exec = 0;
  uint64_t sq_tail = 0;

  // Retry state of the WQE at sq_exec (RC).
  uint32_t retry_left = 0;
  uint32_t rnr_left = 0;
  uint64_t resume_at_ns = 0;
  bool scheduled = false;  // waiting in the retry scheduler
  // WQEs [sq_exec, sq_sent) are on the network, waiting for their answers
  // (requester.h answer_from_network); meaningless while sq_sent <= sq_exec.
  uint64_t sq_sent = 0;
  bool on_network() const { return sq_sent > sq_exec; }

  Destination peer;  // RC/UC: the connected remote QP (set at RTR)
  QpSendAnswers send_answers{this};  // where a transport that answers later answers it
  std::atomic<int> mcast_groups{0};
  uint32_t async_reported = 0;

  // ibv_wr_* batch state (between wr_start and wr_complete/wr_abort).
  uint64_t batch_tail = 0;
  int batch_error = 0;
  SendWqe* batch_cur = nullptr;

  SendWqe& slot(uint64_t pos) { return sq[pos & sq_mask]; }
  ibv_sge* sges(uint64_t pos) { return &sq_sges[(pos & sq_mask) * cap.max_send_sge]; }
  uint8_t* inline_buf(uint64_t pos) { return &sq_inline[(pos & sq_mask) * cap.max_inline_data]; }
  Destination& ud_dest(uint64_t pos) { return sq_ud[pos & sq_mask]; }
  uint8_t* tso_hdr(uint64_t pos) { return sq_tso_hdr.data() + (pos & sq_mask) * max_tso_header; }
  ibv_qp_state state() const { return attr.qp_state; }
};

Qp* create_qp(Context* ctx, ibv_qp_init_attr_ex* attr);  // nullptr + errno
int modify_qp(Qp* qp, ibv_qp_attr* attr, int mask);
int query_qp(Qp* qp, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init);
int destroy_qp(Qp* qp);

// ibv_open_qp handles on XRC_RECV QPs (qp_open.cpp).
Qp* open_qp(Context* ctx, const ibv_qp_open_attr& attr);  // nullptr + errno
bool is_opened_handle(const Qp* qp);
int modify_opened(Qp* h, ibv_qp_attr* attr, int mask);
int query_opened(Qp* h, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init);
int close_opened(Qp* h);
int post_send(Qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int post_recv(Qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);

// Moves the QP to ERR and flushes both queues. Caller holds sq_mu.
void enter_error_locked(Qp* qp);
// Moves a UC/UD QP to SQE and flushes its send queue. Caller holds sq_mu.
void enter_send_queue_error_locked(Qp* qp);
// Acts on errors that peers flagged on QPs of this CQ (shared `attention`).
void handle_qp_attention(Cq* cq);

// The extended post API (ibv_qp_ex wr_* function pointers).
void install_qp_ex_ops(Qp* qp);

}  // namespace sv
