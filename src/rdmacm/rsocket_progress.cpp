// rsockets, stream sockets: making progress. Completions (what the peer
// wrote, credits it granted, our sends that finished), CM events (the
// connect/accept state machine, disconnects), credit grants, and sleeping
// on the completion channel and CM channel fds until something happens.
#include <endian.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <cstdlib>

#include "c_boundary.h"
#include "rsocket_stream.h"
#include "rsocket_wr.h"

namespace sv::rdmacm::rs {
namespace {

constexpr int kCqBatch = 16;
constexpr unsigned kAckBatch = 64;
constexpr int kResolveTimeoutMs = 2000;
constexpr uint64_t kCmCheckIntervalNs = 1000000;  // 1 ms

void fail_connect(RSocket& rs, int err) {
  rs.so_error = err;
  rs.phase = Phase::kFailed;
}

void broken(RSocket& rs) {
  if (!rs.conn_error && !rs.peer_gone) rs.conn_error = ECONNRESET;
}

int error_of(const rdma_cm_event* ev, int fallback) {
  return ev->status < 0 ? -ev->status : fallback;
}

void begin_connect(RSocket& rs) {
  if (create_endpoint(rs, rs.id) != 0) return fail_connect(rs, errno);
  ConnData cd = local_conn_data(rs);
  rdma_conn_param param{};
  param.private_data = &cd;
  param.private_data_len = sizeof cd;
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  if (rdma_connect(rs.id, &param) != 0) return fail_connect(rs, errno);
  rs.phase = Phase::kConnecting;
}

void on_cm_event(RSocket& rs, rdma_cm_event* ev) {
  switch (ev->event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (rs.phase != Phase::kResolvingAddr) break;
      if (rdma_resolve_route(rs.id, kResolveTimeoutMs) != 0)
        fail_connect(rs, errno);
      else
        rs.phase = Phase::kResolvingRoute;
      break;
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      if (rs.phase == Phase::kResolvingRoute) begin_connect(rs);
      break;
    case RDMA_CM_EVENT_ESTABLISHED:
      if (rs.phase == Phase::kConnecting) {
        if (start_session(rs, ev->param.conn.private_data, ev->param.conn.private_data_len) != 0) {
          fail_connect(rs, errno);
          rdma_disconnect(rs.id);
          break;
        }
        rs.phase = Phase::kConnected;
      } else if (rs.phase == Phase::kAccepting) {
        rs.phase = Phase::kConnected;
      }
      break;
    case RDMA_CM_EVENT_REJECTED:
      fail_connect(rs, ECONNREFUSED);
      break;
    case RDMA_CM_EVENT_ADDR_ERROR:
      fail_connect(rs, error_of(ev, EADDRNOTAVAIL));
      break;
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
      fail_connect(rs, error_of(ev, EHOSTUNREACH));
      break;
    case RDMA_CM_EVENT_CONNECT_ERROR:
      fail_connect(rs, error_of(ev, ECONNRESET));
      break;
    case RDMA_CM_EVENT_DISCONNECTED:
      if (rs.phase == Phase::kConnected) {
        rs.peer_gone = true;
        rs.peer_eof = true;
      } else if (rs.phase == Phase::kConnecting || rs.phase == Phase::kAccepting) {
        fail_connect(rs, ECONNRESET);
      }
      break;
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      if (rs.phase == Phase::kConnected)
        rs.conn_error = ENODEV;
      else
        fail_connect(rs, ENODEV);
      break;
    default:
      break;
  }
  rdma_ack_cm_event(ev);
}

void on_receive(RSocket& rs, const ibv_wc& wc) {
  if (wc.status != IBV_WC_SUCCESS) {
    if (wc.status != IBV_WC_WR_FLUSH_ERR) broken(rs);
    return;
  }
  if (!(wc.wc_flags & IBV_WC_WITH_IMM)) return;
  if (!rs.conn_error && post_one_receive(rs) == 0) rs.ledger.message_reposted();
  const uint32_t imm = be32toh(wc.imm_data);
  const uint32_t arg = imm_arg(imm);
  switch (imm_op(imm)) {
    case Op::kData:
      if (!rs.ring.arrived(arg)) broken(rs);
      break;
    case Op::kCredit: {
      CreditGrant g = CreditGrant::unpack(arg);
      rs.credits.grant(g.messages);
      rs.remote.grant(g.bytes);
      break;
    }
    case Op::kCtrl:
      rs.peer_eof = true;
      if (static_cast<Ctrl>(arg) == Ctrl::kDisconnect) rs.peer_gone = true;
      break;
    case Op::kIomap:
      break;  // the entry is in our table already
  }
}

}  // namespace

void send_grants(RSocket& rs) {
  if (rs.phase != Phase::kConnected || rs.conn_error || rs.peer_gone) return;
  while (rs.ledger.due() && can_send_ctrl(rs)) {
    CreditGrant g = rs.ledger.next();
    if (post_ctrl(rs, Op::kCredit, g.pack()) != 0) return;
    rs.ledger.commit(g);
  }
}

void poll_cq(RSocket& rs) {
  if (!rs.cq) return;
  ibv_wc wc[kCqBatch];
  bool any = false;
  for (;;) {
    int n = ibv_poll_cq(rs.cq, kCqBatch, wc);
    if (n <= 0) break;
    any = true;
    for (int i = 0; i < n; ++i) {
      if (wr_kind(wc[i].wr_id) == WrKind::kRecv) {
        on_receive(rs, wc[i]);
      } else {
        ++rs.sqe_avail;
        rs.staging.release(wr_staged(wc[i].wr_id));
        if (wc[i].status != IBV_WC_SUCCESS && wc[i].status != IBV_WC_WR_FLUSH_ERR) broken(rs);
      }
    }
    if (n < kCqBatch) break;
  }
  if (any) {
    send_grants(rs);
    rs.wakeup.notify_all();
  }
}

void pump_cm(RSocket& rs) {
  if (!rs.channel) return;
  rs.last_cm_check_ns = now_ns();
  rdma_cm_event* ev = nullptr;
  while (rdma_get_cm_event(rs.channel, &ev) == 0) {
    if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST && rs.phase == Phase::kListening) {
      rs.backlog.push_back(ev);  // acked by raccept
      continue;
    }
    on_cm_event(rs, ev);
  }
  rs.wakeup.notify_all();
}

void progress(RSocket& rs, bool check_cm) {
  // The CM first, then the CQ. A peer posts its last bytes before it
  // disconnects (rclose waits for its sends to complete), so once its
  // DISCONNECTED has been read those bytes are in our CQ. The other way
  // round, a disconnect that came between the two reads made the end of the
  // stream overtake them: rrecv returned 0 with the bytes still unread.
  if (check_cm || rs.phase != Phase::kConnected ||
      now_ns() - rs.last_cm_check_ns > kCmCheckIntervalNs)
    pump_cm(rs);
  poll_cq(rs);
}

void consume_cq_events(RSocket& rs) {
  if (!rs.comp_channel) return;
  ibv_cq* cq;
  void* context;
  while (ibv_get_cq_event(rs.comp_channel, &cq, &context) == 0) {
    rs.cq_armed = false;
    if (++rs.unacked_cq_events >= kAckBatch) {
      ibv_ack_cq_events(rs.cq, rs.unacked_cq_events);
      rs.unacked_cq_events = 0;
    }
  }
}

void arm_cq(RSocket& rs) {
  if (rs.cq && !rs.cq_armed && ibv_req_notify_cq(rs.cq, 0) == 0) rs.cq_armed = true;
}

int sleep_fds(const RSocket& rs, pollfd* out) {
  int n = 0;
  if (rs.comp_channel) out[n++] = pollfd{rs.comp_channel->fd, POLLIN, 0};
  if (rs.channel) out[n++] = pollfd{rs.channel->fd, POLLIN, 0};
  return n;
}

void sleep_once(RSocket& rs, Lock& lock, int timeout_ms) {
  // A cap, so that a wake-up another thread consumed costs at most this.
  constexpr int kMaxSleepMs = 1000;
  pollfd fds[2];
  const int n = sleep_fds(rs, fds);
  rs.sleeper = true;
  lock.unlock();
  poll(fds, n, timeout_ms < 0 ? kMaxSleepMs : std::min(timeout_ms, kMaxSleepMs));
  lock.lock();
  rs.sleeper = false;
  for (int i = 0; i < n; ++i) {
    if (!(fds[i].revents & POLLIN)) continue;
    if (rs.comp_channel && fds[i].fd == rs.comp_channel->fd)
      consume_cq_events(rs);
    else
      pump_cm(rs);  // the CM channel: handle its events now, not a millisecond later
  }
  rs.wakeup.notify_all();
}

bool can_send_ctrl(const RSocket& rs) { return rs.sqe_avail > 0 && rs.credits.can_send_ctrl(); }

int post_ctrl(RSocket& rs, Op op, uint32_t arg) {
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = wr_id(WrKind::kCtrl, 0);
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.imm_data = htobe32(imm_pack(op, arg));
  wr.wr.rdma.remote_addr = rs.peer.ring_addr;
  wr.wr.rdma.rkey = rs.peer.ring_rkey;
  int rc = ibv_post_send(rs.id->qp, &wr, &bad);
  if (rc) {
    broken(rs);
    return fail(rc);
  }
  --rs.sqe_avail;
  rs.credits.spend();
  return 0;
}

bool send_side_closed(const RSocket& rs) { return rs.shut_wr || rs.peer_gone || rs.conn_error; }

int send_error(const RSocket& rs) {
  if (rs.conn_error) return rs.conn_error;
  if (rs.shut_wr || rs.peer_gone) return EPIPE;
  return ENOTCONN;
}

int drive_connection(RSocket& rs, Lock& lock, bool nonblock) {
  for (;;) {
    if (rs.closed) return fail(EBADF);
    pump_cm(rs);
    switch (rs.phase) {
      case Phase::kConnected:
        return 0;
      case Phase::kFailed: {
        int err = rs.so_error ? rs.so_error : (rs.conn_error ? rs.conn_error : ECONNREFUSED);
        rs.so_error = 0;
        return fail(err);
      }
      case Phase::kResolvingAddr:
      case Phase::kResolvingRoute:
      case Phase::kConnecting:
      case Phase::kAccepting:
        break;
      default:
        return fail(ENOTCONN);
    }
    if (nonblock) return fail(EAGAIN);
    pollfd fd{rs.channel->fd, POLLIN, 0};
    lock.unlock();
    poll(&fd, 1, 1000);
    lock.lock();
  }
}

bool can_send_data(const RSocket& rs, size_t want) {
  return rs.sqe_avail > 1 && rs.credits.can_send_data() && rs.remote.writable() > 0 &&
         (rs.staging.free() > 0 || want <= rs.inline_size);
}

short stream_revents(RSocket& rs, short events) {
  progress(rs, false);
  short r = 0;
  switch (rs.phase) {
    case Phase::kListening:
      if (!rs.backlog.empty()) r |= POLLIN;
      break;
    case Phase::kFailed:
      r |= POLLOUT | POLLERR | POLLHUP;
      break;
    case Phase::kConnected:
      if (rs.ring.readable() || rs.peer_eof || rs.shut_rd || rs.conn_error) r |= POLLIN;
      if (can_send_data(rs, 1) || send_side_closed(rs)) r |= POLLOUT;
      if (rs.conn_error)
        r |= POLLERR | POLLHUP;
      else if (rs.peer_gone && rs.shut_wr && !rs.ring.readable())
        r |= POLLHUP;
      break;
    default:
      break;
  }
  return r & (events | POLLERR | POLLHUP);
}

}  // namespace sv::rdmacm::rs
