// Small helpers shared by the verbs API tests (device, mr, cq, datapath,
// multiprocess). Public <infiniband/verbs.h> API only, like verbs_fixture.h.
//
// Waiting never spins for long: empty polls sleep 100 us, so a test that
// waits for a completion which never comes costs little CPU and ends at
// its timeout.
#pragma once

#include <infiniband/verbs.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "verbs_fixture.h"

namespace svtest::util {

inline constexpr uint32_t kQkey = 0x11111111;
inline constexpr uint32_t kGrh = 40;

inline uint64_t mono_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}
inline uint64_t real_ns() {
  timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}
inline double ms_since(uint64_t t0) { return double(mono_ns() - t0) / 1e6; }
inline void sleep_ms(int ms) { usleep(static_cast<useconds_t>(ms) * 1000); }

// Polls until `n` completions arrived or `timeout_ms` passed (sleeping
// between empty polls). Returns what arrived, possibly fewer than n.
inline std::vector<ibv_wc> wait_wc(ibv_cq* cq, int n, int timeout_ms = 2000) {
  std::vector<ibv_wc> out;
  uint64_t deadline = mono_ns() + uint64_t(timeout_ms) * 1000000ull;
  while (static_cast<int>(out.size()) < n) {
    ibv_wc wc[16];
    int want = n - static_cast<int>(out.size());
    int got = ibv_poll_cq(cq, want < 16 ? want : 16, wc);
    if (got < 0) break;
    out.insert(out.end(), wc, wc + got);
    if (got == 0) {
      if (mono_ns() > deadline) break;
      usleep(100);
    }
  }
  return out;
}

// Everything that arrives within `ms` (for "nothing arrives" checks).
inline std::vector<ibv_wc> drain(ibv_cq* cq, int ms = 20) {
  std::vector<ibv_wc> out;
  uint64_t deadline = mono_ns() + uint64_t(ms) * 1000000ull;
  do {
    ibv_wc wc[16];
    int got = ibv_poll_cq(cq, 16, wc);
    if (got < 0) break;
    out.insert(out.end(), wc, wc + got);
    if (got == 0) usleep(200);
  } while (mono_ns() < deadline);
  return out;
}

// True when `fd` is readable within `timeout_ms`.
inline bool readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  int r = poll(&p, 1, timeout_ms);
  return r == 1 && (p.revents & POLLIN);
}

inline int post_recv(ibv_qp* qp, uint64_t wr_id, ibv_sge* sg, int n, ibv_recv_wr** bad_out = nullptr) {
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = sg;
  wr.num_sge = n;
  ibv_recv_wr* bad = nullptr;
  int rc = ibv_post_recv(qp, &wr, &bad);
  if (bad_out) *bad_out = bad;
  return rc;
}
inline int post_recv(ibv_qp* qp, uint64_t wr_id, ibv_sge sg) { return post_recv(qp, wr_id, &sg, 1); }

inline int post_srq_recv(ibv_srq* srq, uint64_t wr_id, ibv_sge sg) {
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sg;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_srq_recv(srq, &wr, &bad);
}

inline ibv_send_wr make_wr(uint64_t wr_id, ibv_sge* sg, int n, ibv_wr_opcode op = IBV_WR_SEND,
                           unsigned flags = IBV_SEND_SIGNALED) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = sg;
  wr.num_sge = n;
  wr.opcode = op;
  wr.send_flags = flags;
  return wr;
}

inline void set_ud(ibv_send_wr& wr, ibv_ah* ah, uint32_t qpn, uint32_t qkey = kQkey) {
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = qpn;
  wr.wr.ud.remote_qkey = qkey;
}

inline int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_out = nullptr) {
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(qp, wr, &bad);
  if (bad_out) *bad_out = bad;
  return rc;
}

// Sends `sg` from p.a to p.b as a SEND (UD addressing filled in when needed).
inline int send_a_to_b(const QpPair& p, uint64_t wr_id, ibv_sge* sg, int n, unsigned flags = IBV_SEND_SIGNALED,
                       ibv_wr_opcode op = IBV_WR_SEND, uint32_t imm = 0) {
  ibv_send_wr wr = make_wr(wr_id, sg, n, op, flags);
  wr.imm_data = imm;
  if (p.type == IBV_QPT_UD) set_ud(wr, p.ah_to_b, p.b->qp_num);
  return post_send(p.a, &wr);
}

inline ibv_qp_state qp_state(ibv_qp* qp) {
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia)) return static_cast<ibv_qp_state>(-1);
  return a.qp_state;
}

inline ibv_qp* create_qp(ibv_pd* pd, ibv_qp_type t, ibv_cq* scq, ibv_cq* rcq, uint32_t depth = 16,
                         ibv_srq* srq = nullptr, uint32_t max_sge = 4, uint32_t max_inline = 64) {
  ibv_qp_init_attr ia{};
  ia.qp_type = t;
  ia.send_cq = scq;
  ia.recv_cq = rcq;
  ia.srq = srq;
  ia.cap.max_send_wr = depth;
  ia.cap.max_recv_wr = depth;
  ia.cap.max_send_sge = max_sge;
  ia.cap.max_recv_sge = max_sge;
  ia.cap.max_inline_data = max_inline;
  return ibv_create_qp(pd, &ia);
}

// RC retry parameters for RTR -> RTS.
struct RcOpts {
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
};

inline int to_rts_with(ibv_qp* qp, RcOpts o) {
  ibv_qp_attr a = valid_attr(qp->context, 0);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = o.timeout;
  a.retry_cnt = o.retry_cnt;
  a.rnr_retry = o.rnr_retry;
  int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (qp->qp_type == IBV_QPT_RC)
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  return ibv_modify_qp(qp, &a, mask);
}

inline int connect_with(ibv_qp* qp, uint32_t dest_qpn, RcOpts o) {
  if (int e = to_init(qp)) return e;
  if (int e = to_rtr(qp, dest_qpn)) return e;
  return to_rts_with(qp, o);
}

// Two connected QPs of one type on CQs the test owns (unlike QpPair, which
// makes its own). Destroys only the QPs and the AH.
struct Link {
  ibv_qp* a = nullptr;
  ibv_qp* b = nullptr;
  ibv_ah* ah = nullptr;  // UD: to 127.0.0.1 (reaches either QP)
  ibv_qp_type type;
  bool ok = false;
  Link(Device& d, ibv_qp_type t, ibv_cq* a_scq, ibv_cq* a_rcq, ibv_cq* b_scq, ibv_cq* b_rcq,
       uint32_t depth = 16, ibv_srq* srq_b = nullptr, RcOpts opts_a = {}, RcOpts opts_b = {})
      : type(t) {
    a = create_qp(d.pd, t, a_scq, a_rcq, depth);
    b = create_qp(d.pd, t, b_scq, b_rcq, depth, srq_b);
    if (!a || !b) return;
    if (connect_with(a, b->qp_num, opts_a) || connect_with(b, a->qp_num, opts_b)) return;
    if (t == IBV_QPT_UD && !(ah = make_ah(d.pd, d.gid_index))) return;
    ok = true;
  }
  ~Link() {
    if (ah) ibv_destroy_ah(ah);
    if (a) ibv_destroy_qp(a);
    if (b) ibv_destroy_qp(b);
  }
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  int send(uint64_t wr_id, ibv_sge* sg, int n, unsigned flags = IBV_SEND_SIGNALED, ibv_wr_opcode op = IBV_WR_SEND,
           uint32_t imm = 0) {
    ibv_send_wr wr = make_wr(wr_id, sg, n, op, flags);
    wr.imm_data = imm;
    if (type == IBV_QPT_UD) set_ud(wr, ah, b->qp_num);
    return post_send(a, &wr);
  }
};

inline void fill_pattern(uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xff);
}
inline bool has_pattern(const uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xff)) return false;
  return true;
}

inline const char* qpt_name(ibv_qp_type t) {
  switch (t) {
    case IBV_QPT_RC:
      return "RC";
    case IBV_QPT_UC:
      return "UC";
    case IBV_QPT_UD:
      return "UD";
    default:
      return "other";
  }
}

}  // namespace svtest::util
