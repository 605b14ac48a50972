// rsockets, stream sockets: moving bytes. A send copies the caller's bytes
// into the staging buffer (or inline into the WR) and writes them into the
// peer's ring with RDMA WRITE WITH IMM; a receive copies them out of our
// ring and returns the space to the peer as credit. Also shutdown and close.
#include <endian.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "c_boundary.h"
#include "rsocket_stream.h"
#include "rsocket_wr.h"

namespace sv::rdmacm::rs {
namespace {

constexpr uint32_t kMaxTransfer = 65536;  // bytes per WRITE, as rdma-core
constexpr int kShutdownWaitMs = 2000;

size_t total_length(const iovec* iov, int iovcnt) {
  size_t n = 0;
  for (int i = 0; i < iovcnt; ++i) n += iov[i].iov_len;
  return n;
}

// Copies `len` bytes starting `offset` bytes into the iovec array to `dst`.
void gather(uint8_t* dst, const iovec* iov, int iovcnt, size_t offset, size_t len) {
  for (int i = 0; i < iovcnt && len; ++i) {
    if (offset >= iov[i].iov_len) {
      offset -= iov[i].iov_len;
      continue;
    }
    size_t n = std::min(len, iov[i].iov_len - offset);
    std::memcpy(dst, static_cast<const uint8_t*>(iov[i].iov_base) + offset, n);
    dst += n;
    len -= n;
    offset = 0;
  }
}

// Copies `len` bytes from `src` into the iovec array, `offset` bytes in.
void scatter(const iovec* iov, int iovcnt, size_t offset, const uint8_t* src, size_t len) {
  for (int i = 0; i < iovcnt && len; ++i) {
    if (offset >= iov[i].iov_len) {
      offset -= iov[i].iov_len;
      continue;
    }
    size_t n = std::min(len, iov[i].iov_len - offset);
    std::memcpy(static_cast<uint8_t*>(iov[i].iov_base) + offset, src, n);
    src += n;
    len -= n;
    offset = 0;
  }
}

// Posts one WRITE WITH IMM of `n` bytes taken `offset` bytes into the iovec.
int post_data(RSocket& rs, const iovec* iov, int iovcnt, size_t offset, uint32_t n) {
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  ibv_sge sge{};
  uint8_t inline_buf[kMaxInline];
  uint32_t staged = 0;
  if (n <= rs.inline_size) {
    gather(inline_buf, iov, iovcnt, offset, n);
    sge.addr = reinterpret_cast<uintptr_t>(inline_buf);
    wr.send_flags = IBV_SEND_INLINE;
  } else {
    StagingRing::Span piece = rs.staging.take(n);
    n = piece.length;  // the caller asked for what available() offered
    gather(rs.sbuf + piece.offset, iov, iovcnt, offset, n);
    sge.addr = reinterpret_cast<uintptr_t>(rs.sbuf + piece.offset);
    sge.lkey = rs.smr->lkey;
    staged = piece.accounted;
  }
  sge.length = n;
  wr.wr_id = wr_id(WrKind::kData, staged);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.imm_data = htobe32(imm_pack(Op::kData, n));
  wr.wr.rdma.remote_addr = rs.peer.ring_addr + rs.remote.offset();
  wr.wr.rdma.rkey = rs.peer.ring_rkey;
  int rc = ibv_post_send(rs.id->qp, &wr, &bad);
  if (rc) {
    rs.staging.release(staged);
    if (!rs.conn_error) rs.conn_error = ECONNRESET;
    return fail(rc);
  }
  rs.remote.advance(n);
  rs.credits.spend();
  --rs.sqe_avail;
  return 0;
}

// Before any transfer: an accepted socket waits for ESTABLISHED; a socket
// still connecting (non-blocking rconnect) finishes first.
int ensure_connected(RSocket& rs, Lock& lock, bool nonblock) {
  if (rs.phase == Phase::kConnected) return 0;
  if (rs.phase == Phase::kIdle || rs.phase == Phase::kBound || rs.phase == Phase::kListening)
    return fail(ENOTCONN);
  return drive_connection(rs, lock, nonblock);
}

bool can_receive(const RSocket& rs) {
  return rs.ring.readable() || rs.peer_eof || rs.shut_rd || rs.conn_error;
}

}  // namespace

ssize_t stream_send(RSocket& rs, const iovec* iov, int iovcnt, int flags) {
  const size_t total = total_length(iov, iovcnt);
  std::lock_guard<std::mutex> serial(rs.send_mutex);
  Lock lock(rs.mutex);
  const bool nonblock = rs.nonblocking(flags);
  if (ensure_connected(rs, lock, nonblock) != 0) return -1;
  size_t sent = 0;
  while (sent < total || total == 0) {
    if (send_side_closed(rs)) {
      if (sent) break;
      return fail_as<ssize_t>(send_error(rs));
    }
    if (total == 0) return 0;
    const size_t want = total - sent;
    if (wait_until(rs, lock, nonblock,
                   [&] { return can_send_data(rs, want) || send_side_closed(rs); }) != 0) {
      if (sent) break;
      return -1;
    }
    if (send_side_closed(rs)) continue;
    uint32_t n = static_cast<uint32_t>(std::min<size_t>(total - sent, kMaxTransfer));
    n = std::min(n, rs.remote.writable());
    if (n > rs.inline_size) n = rs.staging.available(n);
    if (post_data(rs, iov, iovcnt, sent, n) != 0) {
      if (sent) break;
      return -1;
    }
    sent += n;
  }
  return static_cast<ssize_t>(sent);
}

ssize_t stream_recv(RSocket& rs, const iovec* iov, int iovcnt, int flags) {
  const size_t total = total_length(iov, iovcnt);
  std::lock_guard<std::mutex> serial(rs.recv_mutex);
  Lock lock(rs.mutex);
  const bool nonblock = rs.nonblocking(flags);
  if (ensure_connected(rs, lock, nonblock) != 0) return -1;
  if (total == 0) return 0;
  const bool peek = flags & MSG_PEEK;
  const bool waitall = (flags & MSG_WAITALL) && !peek;
  size_t got = 0;
  while (got < total) {
    if (wait_until(rs, lock, nonblock, [&] { return can_receive(rs); }) != 0) {
      if (got) break;
      return -1;
    }
    if (!rs.ring.readable()) {
      if (got || rs.peer_eof || rs.shut_rd) break;
      return fail_as<ssize_t>(rs.conn_error ? rs.conn_error : ECONNRESET);
    }
    // Copy out in at most two pieces (the ring wraps once).
    uint32_t head = rs.ring.head();
    size_t want = std::min<size_t>(total - got, rs.ring.readable());
    size_t copied = 0;
    while (copied < want) {
      size_t piece = std::min<size_t>(want - copied, rs.ring.size() - head);
      scatter(iov, iovcnt, got + copied, rs.rbuf + head, piece);
      copied += piece;
      head = (head + static_cast<uint32_t>(piece)) % rs.ring.size();
    }
    got += copied;
    if (peek) break;
    rs.ring.consume(static_cast<uint32_t>(copied));
    rs.ledger.bytes_read(static_cast<uint32_t>(copied));
    send_grants(rs);
    if (!waitall) break;
  }
  return static_cast<ssize_t>(got);
}

int stream_shutdown(RSocket& rs, int how) {
  std::lock_guard<std::mutex> serial(rs.send_mutex);
  Lock lock(rs.mutex);
  if (rs.phase == Phase::kAccepting) drive_connection(rs, lock, true);
  if (rs.phase != Phase::kConnected) return fail(ENOTCONN);
  Ctrl ctrl{};
  bool send = false;
  if (how == SHUT_RD || how == SHUT_RDWR) rs.shut_rd = true;
  if ((how == SHUT_WR || how == SHUT_RDWR) && !rs.shut_wr) {
    send = true;
    ctrl = rs.shut_rd ? Ctrl::kDisconnect : Ctrl::kShutdown;
  }
  if (how == SHUT_WR || how == SHUT_RDWR) rs.shut_wr = true;
  if (send && !rs.peer_gone && !rs.conn_error) {
    auto usable = [&] { return can_send_ctrl(rs) || rs.peer_gone || rs.conn_error; };
    if (wait_until(rs, lock, false, usable, kShutdownWaitMs) == 0 && can_send_ctrl(rs) &&
        !rs.peer_gone && !rs.conn_error)
      post_ctrl(rs, Op::kCtrl, static_cast<uint32_t>(ctrl));
    auto drained = [&] { return rs.sqe_avail == rs.sq_size || rs.peer_gone || rs.conn_error; };
    wait_until(rs, lock, false, drained, kShutdownWaitMs);
  }
  return 0;
}

void stream_close(RSocket& rs) {
  if ((rs.phase == Phase::kConnected || rs.phase == Phase::kAccepting) && !(rs.shut_rd && rs.shut_wr))
    stream_shutdown(rs, SHUT_RDWR);
  Lock lock(rs.mutex);
  rs.closed = true;
  rs.wakeup.notify_all();
  for (rdma_cm_event* ev : rs.backlog) {
    rdma_cm_id* child = ev->id;
    rdma_reject(child, nullptr, 0);
    rdma_ack_cm_event(ev);
    rdma_destroy_id(child);
  }
  rs.backlog.clear();
  if (rs.id && (rs.phase == Phase::kConnected || rs.phase == Phase::kAccepting ||
                rs.phase == Phase::kConnecting))
    rdma_disconnect(rs.id);
  destroy_endpoint(rs);
  if (rs.id) rdma_destroy_id(rs.id);
  rs.id = nullptr;
  if (rs.channel) rdma_destroy_event_channel(rs.channel);
  rs.channel = nullptr;
}

}  // namespace sv::rdmacm::rs
