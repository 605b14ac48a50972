#include "verbs_fixture.h"

#include <arpa/inet.h>
#include <time.h>

#include <cstring>
#include <stdexcept>

namespace svtest {

int loopback_gid_index(ibv_context* ctx) {
  ibv_gid want{};
  want.raw[10] = want.raw[11] = 0xff;
  inet_pton(AF_INET, "127.0.0.1", want.raw + 12);
  ibv_port_attr pa;
  if (ibv_query_port(ctx, 1, &pa)) return -1;
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    ibv_gid g;
    if (ibv_query_gid(ctx, 1, i, &g) == 0 && std::memcmp(&g, &want, sizeof g) == 0) return i;
  }
  return -1;
}

ibv_qp_attr valid_attr(ibv_context* ctx, uint32_t dest_qpn) {
  ibv_qp_attr a{};
  a.qkey = 0x11111111;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dest_qpn;
  a.rq_psn = 0;
  a.sq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.max_rd_atomic = 1;
  a.min_rnr_timer = 1;  // 0.01 ms
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.path_mig_state = IBV_MIG_MIGRATED;
  a.en_sqd_async_notify = 0;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(loopback_gid_index(ctx));
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.grh.dgid.raw[10] = a.ah_attr.grh.dgid.raw[11] = 0xff;
  inet_pton(AF_INET, "127.0.0.1", a.ah_attr.grh.dgid.raw + 12);
  return a;
}

int to_init(ibv_qp* qp, uint32_t qkey) {
  ibv_qp_attr a = valid_attr(qp->context, 0);
  a.qp_state = IBV_QPS_INIT;
  a.qkey = qkey;
  int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
  mask |= qp->qp_type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS;
  return ibv_modify_qp(qp, &a, mask);
}

int to_rtr(ibv_qp* qp, uint32_t dest_qpn) {
  ibv_qp_attr a = valid_attr(qp->context, dest_qpn);
  a.qp_state = IBV_QPS_RTR;
  int mask = IBV_QP_STATE;
  if (qp->qp_type != IBV_QPT_UD) mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  if (qp->qp_type == IBV_QPT_RC) mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  return ibv_modify_qp(qp, &a, mask);
}

int to_rts(ibv_qp* qp) {
  ibv_qp_attr a = valid_attr(qp->context, 0);
  a.qp_state = IBV_QPS_RTS;
  int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (qp->qp_type == IBV_QPT_RC) mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  return ibv_modify_qp(qp, &a, mask);
}

int connect_qp(ibv_qp* qp, uint32_t dest_qpn, uint32_t qkey) {
  if (int e = to_init(qp, qkey)) return e;
  if (int e = to_rtr(qp, dest_qpn)) return e;
  return to_rts(qp);
}

int reset_and_reconnect(QpPair& p) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RESET;
  if (int e = ibv_modify_qp(p.a, &a, IBV_QP_STATE)) return e;
  if (int e = ibv_modify_qp(p.b, &a, IBV_QP_STATE)) return e;
  if (int e = connect_qp(p.a, p.b->qp_num)) return e;
  return connect_qp(p.b, p.a->qp_num);
}

ibv_wc_status post_and_wait(ibv_qp* qp, ibv_cq* cq, ibv_send_wr wr) {
  wr.next = nullptr;
  ibv_send_wr* bad;
  if (ibv_post_send(qp, &wr, &bad)) return IBV_WC_GENERAL_ERR;
  auto wc = poll_n(cq, 1);
  return wc.size() == 1 ? wc[0].status : IBV_WC_GENERAL_ERR;
}

ibv_qp* create_rc_qp(ibv_pd* pd, ibv_cq* cq, uint32_t depth) {
  ibv_qp_init_attr ia{};
  ia.qp_type = IBV_QPT_RC;
  ia.send_cq = ia.recv_cq = cq;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = depth;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  return ibv_create_qp(pd, &ia);
}

std::vector<ibv_wc> poll_n(ibv_cq* cq, int n, int timeout_ms) {
  std::vector<ibv_wc> out;
  timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  while (static_cast<int>(out.size()) < n) {
    ibv_wc wc[16];
    int got = ibv_poll_cq(cq, std::min(16, n - static_cast<int>(out.size())), wc);
    if (got < 0) break;
    out.insert(out.end(), wc, wc + got);
    if (got == 0) {
      clock_gettime(CLOCK_MONOTONIC, &now);
      if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 > timeout_ms) break;
    }
  }
  return out;
}

Device::Device() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n < 1) throw std::runtime_error("no device");
  ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!ctx) throw std::runtime_error("open failed");
  pd = ibv_alloc_pd(ctx);
  gid_index = loopback_gid_index(ctx);
}

Device::~Device() {
  if (pd) ibv_dealloc_pd(pd);
  if (ctx) ibv_close_device(ctx);
}

Buffer::Buffer(ibv_pd* pd, size_t size, int access) : bytes(size) {
  mr = ibv_reg_mr(pd, bytes.data(), size, access);
  if (!mr) throw std::runtime_error("reg_mr failed");
}

Buffer::~Buffer() {
  if (mr) ibv_dereg_mr(mr);
}

ibv_ah* make_ah(ibv_pd* pd, int gid_index) {
  ibv_ah_attr a{};
  a.is_global = 1;
  a.port_num = 1;
  a.grh.sgid_index = static_cast<uint8_t>(gid_index);
  a.grh.hop_limit = 64;
  a.grh.dgid.raw[10] = a.grh.dgid.raw[11] = 0xff;
  inet_pton(AF_INET, "127.0.0.1", a.grh.dgid.raw + 12);
  return ibv_create_ah(pd, &a);
}

QpPair::QpPair(Device& d, ibv_qp_type t, uint32_t depth, ibv_srq* srq_b) : dev(d), type(t) {
  cq_a = ibv_create_cq(d.ctx, static_cast<int>(depth * 2), nullptr, nullptr, 0);
  cq_b = ibv_create_cq(d.ctx, static_cast<int>(depth * 2), nullptr, nullptr, 0);
  ibv_qp_init_attr ia{};
  ia.qp_type = t;
  ia.cap.max_send_wr = depth;
  ia.cap.max_recv_wr = depth;
  ia.cap.max_send_sge = 4;
  ia.cap.max_recv_sge = 4;
  ia.cap.max_inline_data = 64;
  ia.send_cq = ia.recv_cq = cq_a;
  a = ibv_create_qp(d.pd, &ia);
  ia.send_cq = ia.recv_cq = cq_b;
  ia.srq = srq_b;
  b = ibv_create_qp(d.pd, &ia);
  if (!cq_a || !cq_b || !a || !b) throw std::runtime_error("QpPair create failed");
  if (connect_qp(a, b->qp_num) || connect_qp(b, a->qp_num)) throw std::runtime_error("QpPair connect failed");
  if (t == IBV_QPT_UD) {
    ah_to_a = make_ah(d.pd, d.gid_index);
    ah_to_b = make_ah(d.pd, d.gid_index);
  }
}

QpPair::~QpPair() {
  if (ah_to_a) ibv_destroy_ah(ah_to_a);
  if (ah_to_b) ibv_destroy_ah(ah_to_b);
  if (a) ibv_destroy_qp(a);
  if (b) ibv_destroy_qp(b);
  if (cq_a) ibv_destroy_cq(cq_a);
  if (cq_b) ibv_destroy_cq(cq_b);
}

}  // namespace svtest
