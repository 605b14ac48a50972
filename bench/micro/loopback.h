// Two connected RC QPs in one process, for measuring softverbs' own
// software path (bench/micro); and how to connect QPs of one process.
#pragma once

#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <cstring>
#include <vector>

// The index of the GID of 127.0.0.1 on port 1 (0 when none is).
inline int loopback_gid_index(ibv_context* ctx) {
  ibv_gid want{};
  want.raw[10] = want.raw[11] = 0xff;
  inet_pton(AF_INET, "127.0.0.1", want.raw + 12);
  for (int i = 0; i < 16; ++i) {
    ibv_gid g;
    if (ibv_query_gid(ctx, 1, i, &g) == 0 && std::memcmp(&g, &want, sizeof g) == 0) return i;
  }
  return 0;
}

// Brings RC QP `qp` to RTS, connected to QP `dest` of this host through
// the GID of 127.0.0.1 (`gid_index`), with remote `access`. 0, or the
// errno of the modify that failed.
inline int connect_loopback(ibv_qp* qp, uint32_t dest, int gid_index, int access) {
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_INIT;
  at.port_num = 1;
  at.qp_access_flags = access;
  if (int e = ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) return e;
  at = {};
  at.qp_state = IBV_QPS_RTR;
  at.path_mtu = IBV_MTU_4096;
  at.dest_qp_num = dest;
  at.max_dest_rd_atomic = 1;
  at.min_rnr_timer = 1;
  at.ah_attr.is_global = 1;
  at.ah_attr.port_num = 1;
  at.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index);
  at.ah_attr.grh.dgid.raw[10] = at.ah_attr.grh.dgid.raw[11] = 0xff;
  inet_pton(AF_INET, "127.0.0.1", at.ah_attr.grh.dgid.raw + 12);
  if (int e = ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return e;
  at = {};
  at.qp_state = IBV_QPS_RTS;
  at.timeout = 14;
  at.retry_cnt = 7;
  at.rnr_retry = 7;
  at.max_rd_atomic = 1;
  return ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                    IBV_QP_MAX_QP_RD_ATOMIC);
}

struct Loopback {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq_a = nullptr;
  ibv_cq* cq_b = nullptr;
  ibv_qp* a = nullptr;
  ibv_qp* b = nullptr;
  std::vector<uint8_t> src = std::vector<uint8_t>(65536), dst = std::vector<uint8_t>(65536);
  ibv_mr* src_mr = nullptr;
  ibv_mr* dst_mr = nullptr;

  Loopback() {
    ibv_device** list = ibv_get_device_list(nullptr);
    ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    pd = ibv_alloc_pd(ctx);
    cq_a = ibv_create_cq(ctx, 256, nullptr, nullptr, 0);
    cq_b = ibv_create_cq(ctx, 256, nullptr, nullptr, 0);
    // Created as perftest does by default: with the extended post API.
    ibv_qp_init_attr_ex ia{};
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 128;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = 64;
    ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    ia.pd = pd;
    ia.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ;
    ia.send_cq = ia.recv_cq = cq_a;
    a = ibv_create_qp_ex(ctx, &ia);
    ia.send_cq = ia.recv_cq = cq_b;
    b = ibv_create_qp_ex(ctx, &ia);
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    src_mr = ibv_reg_mr(pd, src.data(), src.size(), access);
    dst_mr = ibv_reg_mr(pd, dst.data(), dst.size(), access);
    const int gid_index = loopback_gid_index(ctx);
    const int remote = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    connect_loopback(a, b->qp_num, gid_index, remote);
    connect_loopback(b, a->qp_num, gid_index, remote);
  }
  ~Loopback() {
    ibv_destroy_qp(a);
    ibv_destroy_qp(b);
    ibv_dereg_mr(src_mr);
    ibv_dereg_mr(dst_mr);
    ibv_destroy_cq(cq_a);
    ibv_destroy_cq(cq_b);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
  }

  void post_recv(uint32_t len) {
    ibv_sge s{reinterpret_cast<uint64_t>(dst.data()), len, dst_mr->lkey};
    ibv_recv_wr wr{};
    wr.sg_list = &s;
    wr.num_sge = 1;
    ibv_recv_wr* bad;
    ibv_post_recv(b, &wr, &bad);
  }

  void post(ibv_wr_opcode op, uint32_t len, bool signaled, bool inlined = false) {
    ibv_sge s{reinterpret_cast<uint64_t>(src.data()), len, src_mr->lkey};
    ibv_send_wr wr{};
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = (signaled ? IBV_SEND_SIGNALED : 0) | (inlined ? IBV_SEND_INLINE : 0);
    wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(dst.data());
    wr.wr.rdma.rkey = dst_mr->rkey;
    ibv_send_wr* bad;
    ibv_post_send(a, &wr, &bad);
  }

  // The same through ibv_qp_ex (ibv_wr_*), inline data.
  void post_ex(ibv_wr_opcode op, uint32_t len, bool signaled) {
    ibv_qp_ex* q = ibv_qp_to_qp_ex(a);
    ibv_wr_start(q);
    q->wr_id = 1;
    q->wr_flags = (signaled ? IBV_SEND_SIGNALED : 0) | IBV_SEND_INLINE;
    if (op == IBV_WR_SEND)
      ibv_wr_send(q);
    else
      ibv_wr_rdma_write(q, dst_mr->rkey, reinterpret_cast<uint64_t>(dst.data()));
    ibv_wr_set_inline_data(q, src.data(), len);
    ibv_wr_complete(q);
  }

  static void wait(ibv_cq* cq) {
    ibv_wc wc;
    while (ibv_poll_cq(cq, 1, &wc) == 0) {
    }
  }
};

