// rsockets, stream sockets: the verbs resources of a connection (PD, CQ
// with its completion channel, RC QP, send staging buffer, receive ring and
// iomap table) and the private data that describes them to the peer.
#include <fcntl.h>
#include <rdma/rdma_cma.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "c_boundary.h"
#include "rsocket_stream.h"
#include "rsocket_wr.h"

namespace sv::rdmacm::rs {
namespace {

constexpr uint32_t kMinQueue = 16;
constexpr uint32_t kMaxQueue = 0xfffe;
constexpr uint8_t kAckTimeout = 14;  // 67 ms: a vanished peer fails sends in ~0.5 s

int post_receives(RSocket& rs, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i)
    if (post_one_receive(rs) != 0) return -1;
  return 0;
}

}  // namespace

int post_one_receive(RSocket& rs) {
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = wr_id(WrKind::kRecv, 0);
  int rc = ibv_post_recv(rs.id->qp, &wr, &bad);
  if (rc) errno = rc;
  return rc ? -1 : 0;
}

int create_endpoint(RSocket& rs, rdma_cm_id* id) {
  rs.sq_size = std::clamp(rs.opt.sq_size, kMinQueue, kMaxQueue);
  rs.rq_size = std::clamp(rs.opt.rq_size, kMinQueue, kMaxQueue);
  const uint32_t sbuf_size = std::clamp(rs.opt.sbuf_size, 4096u, 1u << 26);
  const uint32_t rbuf_size = std::clamp(rs.opt.rbuf_size, 4096u, 1u << 26);
  const uint32_t slots = std::min(rs.opt.iomap_slots, 4096u);

  rs.pd = ibv_alloc_pd(id->verbs);
  if (!rs.pd) return -1;
  rs.comp_channel = ibv_create_comp_channel(id->verbs);
  if (!rs.comp_channel) return -1;
  fcntl(rs.comp_channel->fd, F_SETFL, fcntl(rs.comp_channel->fd, F_GETFL) | O_NONBLOCK);
  rs.cq =
      ibv_create_cq(id->verbs, static_cast<int>(rs.sq_size + rs.rq_size), &rs, rs.comp_channel, 0);
  if (!rs.cq) return -1;

  rs.sbuf_pages = map_pages(sbuf_size);
  rs.sbuf = rs.sbuf_pages.data;
  if (!rs.sbuf) return -1;
  rs.smr = ibv_reg_mr(rs.pd, rs.sbuf, sbuf_size, IBV_ACCESS_LOCAL_WRITE);
  if (!rs.smr) return -1;
  rs.rbuf_pages = map_pages(rbuf_size + size_t(slots) * sizeof(IomapEntry));
  rs.rbuf = rs.rbuf_pages.data;
  if (!rs.rbuf) return -1;
  rs.rmr = ibv_reg_mr(rs.pd, rs.rbuf, rs.rbuf_pages.size,
                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!rs.rmr) return -1;
  rs.staging = StagingRing(sbuf_size);
  rs.ring = ReceiveRing(rbuf_size);
  rs.ledger = GrantLedger(rs.rq_size, rbuf_size);
  rs.opt.iomap_slots = slots;

  uint8_t timeout = kAckTimeout;
  rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout, sizeof timeout);

  ibv_qp_init_attr attr{};
  attr.qp_context = &rs;
  attr.send_cq = rs.cq;
  attr.recv_cq = rs.cq;
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = 1;
  attr.cap.max_send_wr = rs.sq_size;
  attr.cap.max_recv_wr = rs.rq_size;
  attr.cap.max_send_sge = 2;
  attr.cap.max_recv_sge = 1;
  attr.cap.max_inline_data = rs.opt.inline_size;
  if (rdma_create_qp(id, rs.pd, &attr) != 0) return -1;
  rs.inline_size = std::min({attr.cap.max_inline_data, rs.opt.inline_size, kMaxInline});
  rs.sqe_avail = rs.sq_size;
  return post_receives(rs, rs.rq_size);
}

void destroy_endpoint(RSocket& rs) {
  if (rs.id && rs.id->qp) rdma_destroy_qp(rs.id);
  for (LocalIomap& m : rs.iomaps)
    if (m.mr) ibv_dereg_mr(m.mr);
  rs.iomaps.clear();
  if (rs.announce_mr) ibv_dereg_mr(rs.announce_mr);
  rs.announce_mr = nullptr;
  unmap_pages(rs.announce_pages);
  rs.announce_buf = nullptr;
  if (rs.cq) {
    if (rs.unacked_cq_events) ibv_ack_cq_events(rs.cq, rs.unacked_cq_events);
    rs.unacked_cq_events = 0;
    ibv_destroy_cq(rs.cq);
    rs.cq = nullptr;
  }
  if (rs.comp_channel) ibv_destroy_comp_channel(rs.comp_channel);
  rs.comp_channel = nullptr;
  if (rs.smr) ibv_dereg_mr(rs.smr);
  if (rs.rmr) ibv_dereg_mr(rs.rmr);
  rs.smr = rs.rmr = nullptr;
  unmap_pages(rs.sbuf_pages);
  unmap_pages(rs.rbuf_pages);
  rs.sbuf = rs.rbuf = nullptr;
  if (rs.pd) ibv_dealloc_pd(rs.pd);
  rs.pd = nullptr;
}

ConnData local_conn_data(const RSocket& rs) {
  ConnData cd{};
  cd.version = ConnData::kVersion;
  cd.flags = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ConnData::kFlagLittleEndian : 0;
  cd.rq_credits = rs.rq_size;
  cd.ring_addr = reinterpret_cast<uintptr_t>(rs.rbuf);
  cd.ring_rkey = rs.rmr->rkey;
  cd.ring_size = rs.ring.size();
  cd.iomap_addr = reinterpret_cast<uintptr_t>(rs.iomap_table());
  cd.iomap_rkey = rs.rmr->rkey;
  cd.iomap_slots = rs.opt.iomap_slots;
  return cd;
}

int start_session(RSocket& rs, const void* private_data, size_t len) {
  ConnData cd{};
  if (!private_data || len < sizeof cd) return fail(EPROTO);
  std::memcpy(&cd, private_data, sizeof cd);
  const uint8_t ours = local_conn_data(rs).flags;
  if (cd.version != ConnData::kVersion || cd.flags != ours || cd.ring_size == 0 ||
      cd.rq_credits == 0)
    return fail(EPROTO);
  rs.peer = cd;
  rs.remote = RemoteRing(cd.ring_size, cd.ring_size);
  rs.credits = MessageCredits(cd.rq_credits);
  return 0;
}

}  // namespace sv::rdmacm::rs
