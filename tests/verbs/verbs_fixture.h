// Helpers for tests that drive softverbs through the public verbs API only.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <vector>

namespace svtest {

// Index of ::ffff:127.0.0.1 in the GID table, or -1.
int loopback_gid_index(ibv_context* ctx);

// Attribute values that are valid for every attribute-mask bit, for a QP
// whose peer is `dest_qpn` on this host. (ah_attr uses the loopback GID.)
ibv_qp_attr valid_attr(ibv_context* ctx, uint32_t dest_qpn);

// Moves a QP RESET -> INIT -> RTR -> RTS with the required attributes.
// `dest_qpn` is ignored for UD. Returns 0 or the failing errno.
int connect_qp(ibv_qp* qp, uint32_t dest_qpn, uint32_t qkey = 0x11111111);
int to_init(ibv_qp* qp, uint32_t qkey = 0x11111111);
int to_rtr(ibv_qp* qp, uint32_t dest_qpn);
int to_rts(ibv_qp* qp);

// Polls until `n` completions arrived or `timeout_ms` passed.
std::vector<ibv_wc> poll_n(ibv_cq* cq, int n, int timeout_ms = 5000);

// A device context with a PD, for the length of a test.
struct Device {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  int gid_index = -1;
  Device();
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
};

// A registered buffer.
struct Buffer {
  std::vector<uint8_t> bytes;
  ibv_mr* mr = nullptr;
  Buffer(ibv_pd* pd, size_t size, int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                                  IBV_ACCESS_REMOTE_READ);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  uint64_t addr() const { return reinterpret_cast<uint64_t>(bytes.data()); }
  ibv_sge sge(size_t offset, uint32_t length) const {
    return ibv_sge{addr() + offset, length, mr->lkey};
  }
};

// Two QPs of one type in one process, connected to each other (for UD:
// both in RTS, each with an AH to the other). Each has its own CQ.
struct QpPair {
  Device& dev;
  ibv_qp_type type;
  ibv_cq* cq_a = nullptr;
  ibv_cq* cq_b = nullptr;
  ibv_qp* a = nullptr;
  ibv_qp* b = nullptr;
  ibv_ah* ah_to_a = nullptr;
  ibv_ah* ah_to_b = nullptr;
  QpPair(Device& d, ibv_qp_type t, uint32_t depth = 64, ibv_srq* srq_b = nullptr);
  ~QpPair();
  QpPair(const QpPair&) = delete;
  QpPair& operator=(const QpPair&) = delete;
};

ibv_ah* make_ah(ibv_pd* pd, int gid_index);

// Both QPs of an RC pair to RESET (a, then b) and connected again, as a
// program brings QPs back after an error: 0, or the errno of the first
// step that failed.
int reset_and_reconnect(QpPair& p);

// An RDMA WRITE of `sges` (which must outlive the WR) to `remote_addr`
// under `rkey`, signaled unless told otherwise.
inline ibv_send_wr write_wr(ibv_sge* sges, int num_sge, uint64_t remote_addr, uint32_t rkey,
                            unsigned send_flags = IBV_SEND_SIGNALED, uint64_t wr_id = 0) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = sges;
  wr.num_sge = num_sge;
  wr.send_flags = send_flags;
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  return wr;
}

// The same into the start of a registered buffer.
inline ibv_send_wr write_wr(ibv_sge* sge, const Buffer& remote, unsigned send_flags = IBV_SEND_SIGNALED) {
  return write_wr(sge, 1, remote.addr(), remote.mr->rkey, send_flags);
}

// Posts one signaled WR on `qp` and waits for its completion on `cq`: its
// status, or IBV_WC_GENERAL_ERR when the post failed or nothing came.
ibv_wc_status post_and_wait(ibv_qp* qp, ibv_cq* cq, ibv_send_wr wr);

// An SRQ of `max_wr` WRs of `max_sge` SGEs; nullptr + errno.
inline ibv_srq* create_srq(ibv_pd* pd, uint32_t max_wr, uint32_t max_sge = 1) {
  ibv_srq_init_attr a{};
  a.attr.max_wr = max_wr;
  a.attr.max_sge = max_sge;
  return ibv_create_srq(pd, &a);
}

// An RC QP in RESET, both queues on `cq`: `depth` WRs, one SGE each.
ibv_qp* create_rc_qp(ibv_pd* pd, ibv_cq* cq, uint32_t depth = 8);

}  // namespace svtest
