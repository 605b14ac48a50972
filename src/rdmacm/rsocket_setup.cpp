// rsockets: creating, binding, listening, accepting, connecting, shutting
// down and closing (the C entry points; the engine is rsocket_stream.h
// and rsocket_dgram.h).
#include <fcntl.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <unistd.h>

#include <cstring>

#include "c_boundary.h"
#include "rsocket_dgram.h"
#include "rsocket_stream.h"

using namespace sv::rdmacm;
using namespace sv::rdmacm::rs;

namespace {

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

socklen_t sockaddr_length(const sockaddr* sa) {
  return sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

// Copies as much as fits and reports the full length (*len 0 and `to`
// null: just the length, as librspreload asks).
void copy_address(const sockaddr* from, sockaddr* to, socklen_t* len) {
  if (!len) return;
  socklen_t full = sockaddr_length(from);
  if (to) std::memcpy(to, from, std::min(*len, full));
  *len = full;
}

int create_stream(RSocket& rs, int domain) {
  rs.channel = rdma_create_event_channel();
  if (!rs.channel) return -1;
  set_nonblocking(rs.channel->fd);
  if (rdma_create_id(rs.channel, &rs.id, &rs, RDMA_PS_TCP) != 0) return -1;
  rs.id->route.addr.src_addr.sa_family = static_cast<sa_family_t>(domain);
  rs.fd = rs.channel->fd;
  return 0;
}

// Builds the rsocket of one connection request (the event is acked here).
std::shared_ptr<RSocket> accept_request(RSocket& listener, rdma_cm_event* ev) {
  auto rs = sv::make_private_shared<RSocket>();
  rs->domain = listener.domain;
  rs->opt = listener.opt;
  rdma_cm_id* id = ev->id;
  uint8_t data[256] = {};
  const size_t len = std::min<size_t>(ev->param.conn.private_data_len, sizeof data);
  if (ev->param.conn.private_data) std::memcpy(data, ev->param.conn.private_data, len);
  rdma_ack_cm_event(ev);

  auto refuse = [&](int err) -> std::shared_ptr<RSocket> {
    rdma_reject(id, nullptr, 0);
    if (!rs->id) rdma_destroy_id(id);
    stream_close(*rs);
    errno = err;
    return nullptr;
  };
  rs->channel = rdma_create_event_channel();
  if (!rs->channel) return refuse(errno);
  set_nonblocking(rs->channel->fd);
  if (rdma_migrate_id(id, rs->channel) != 0) return refuse(errno);
  rs->id = id;
  id->context = rs.get();
  rs->fd = rs->channel->fd;
  if (create_endpoint(*rs, id) != 0) return refuse(errno);
  if (start_session(*rs, data, len) != 0) return refuse(errno);
  ConnData cd = local_conn_data(*rs);
  rdma_conn_param param{};
  param.private_data = &cd;
  param.private_data_len = sizeof cd;
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.rnr_retry_count = 7;
  if (rdma_accept(id, &param) != 0) {
    int err = errno;
    stream_close(*rs);
    errno = err;
    return nullptr;
  }
  rs->phase = Phase::kAccepting;
  return rs;
}

int stream_accept(RSocket& listener, sockaddr* addr, socklen_t* addrlen) {
  Lock lock(listener.mutex);
  if (listener.phase != Phase::kListening) return fail(EINVAL);
  for (;;) {
    if (listener.closed) return fail(EBADF);
    pump_cm(listener);
    while (!listener.backlog.empty()) {
      rdma_cm_event* ev = listener.backlog.front();
      listener.backlog.pop_front();
      std::shared_ptr<RSocket> rs = accept_request(listener, ev);
      if (!rs) continue;  // that peer left or could not be served: try the next
      copy_address(rdma_get_peer_addr(rs->id), addr, addrlen);
      table_insert(rs);
      return rs->fd;
    }
    if (listener.nonblocking(0)) return fail(EAGAIN);
    pollfd fd{listener.channel->fd, POLLIN, 0};
    lock.unlock();
    poll(&fd, 1, 1000);
    lock.lock();
  }
}

int stream_connect(RSocket& rs, const sockaddr* addr, socklen_t addrlen) {
  Lock lock(rs.mutex);
  const bool nonblock = rs.nonblocking(0);
  switch (rs.phase) {
    case Phase::kIdle:
    case Phase::kBound:
      if (!addr || addrlen < sizeof(sockaddr_in)) return fail(EINVAL);
      if (rdma_resolve_addr(rs.id, nullptr, const_cast<sockaddr*>(addr), 2000) != 0) return -1;
      rs.phase = Phase::kResolvingAddr;
      break;
    case Phase::kResolvingAddr:
    case Phase::kResolvingRoute:
    case Phase::kConnecting:
      if (nonblock) return fail(EALREADY);
      break;
    case Phase::kConnected:
      return fail(EISCONN);
    default:
      return fail(EINVAL);
  }
  if (drive_connection(rs, lock, nonblock) == 0) return 0;
  if (errno == EAGAIN) errno = EINPROGRESS;
  return -1;
}

}  // namespace

extern "C" SOFTVERBS_RDMACM_EXPORT int rsocket(int domain, int type, int protocol) {
  // socket(2)'s flags: our fds are close-on-exec anyway; SOCK_NONBLOCK is
  // rfcntl(O_NONBLOCK). (rdma-core refuses both; programs under
  // librspreload would then fall back to TCP without a word.)
  const bool nonblocking = type & SOCK_NONBLOCK;
  type &= ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  if ((domain != AF_INET && domain != AF_INET6) || (type != SOCK_STREAM && type != SOCK_DGRAM) ||
      (type == SOCK_STREAM && protocol && protocol != IPPROTO_TCP) ||
      (type == SOCK_DGRAM && protocol && protocol != IPPROTO_UDP))
    return fail(ENOTSUP);
  return guarded(-1, [&] {
    auto rs = sv::make_private_shared<RSocket>();
    rs->type = type;
    rs->domain = domain;
    int rc = type == SOCK_STREAM ? create_stream(*rs, domain) : dgram_create(*rs, domain);
    if (rc != 0) {
      int err = errno;
      if (type == SOCK_STREAM)
        stream_close(*rs);
      else
        dgram_close(*rs);
      return fail(err);
    }
    if (nonblocking) rs->fd_flags = O_NONBLOCK;
    table_insert(rs);
    return rs->fd;
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rbind(int socket, const struct sockaddr* addr,
                                             socklen_t addrlen) {
  auto rs = lookup(socket);
  if (!rs) return fail(EBADF);
  return guarded(-1, [&] {
    if (rs->type == SOCK_DGRAM) return dgram_bind(*rs, addr, addrlen);
    Lock lock(rs->mutex);
    if (rs->phase != Phase::kIdle) return fail(EINVAL);
    if (rdma_bind_addr(rs->id, const_cast<sockaddr*>(addr)) != 0) return -1;
    rs->phase = Phase::kBound;
    return 0;
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rlisten(int socket, int backlog) {
  auto rs = lookup(socket);
  if (!rs) return fail(EBADF);
  if (rs->type != SOCK_STREAM) return fail(EOPNOTSUPP);
  return guarded(-1, [&] {
    Lock lock(rs->mutex);
    if (rs->phase == Phase::kListening) return 0;
    if (rs->phase != Phase::kIdle && rs->phase != Phase::kBound) return fail(EINVAL);
    if (rdma_listen(rs->id, backlog) != 0) return -1;
    rs->phase = Phase::kListening;
    return 0;
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int raccept(int socket, struct sockaddr* addr,
                                               socklen_t* addrlen) {
  auto rs = lookup(socket);
  if (!rs) return fail(EBADF);
  if (rs->type != SOCK_STREAM) return fail(EOPNOTSUPP);
  return guarded(-1, [&] { return stream_accept(*rs, addr, addrlen); });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rconnect(int socket, const struct sockaddr* addr,
                                                socklen_t addrlen) {
  auto rs = lookup(socket);
  if (!rs) return fail(EBADF);
  return guarded(-1, [&] {
    if (rs->type == SOCK_DGRAM) return dgram_connect(*rs, addr, addrlen);
    return stream_connect(*rs, addr, addrlen);
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rshutdown(int socket, int how) {
  auto rs = lookup(socket);
  if (!rs) return fail(EBADF);
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) return fail(EINVAL);
  return guarded(-1, [&] {
    if (rs->type == SOCK_DGRAM) return shutdown(rs->fd, how);
    return stream_shutdown(*rs, how);
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rclose(int socket) {
  auto rs = lookup(socket);
  if (!rs) return fail(EBADF);
  return guarded(-1, [&] {
    table_remove(socket);  // before the fd number can be reused
    if (rs->type == SOCK_DGRAM)
      dgram_close(*rs);
    else
      stream_close(*rs);
    return 0;
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rgetpeername(int socket, struct sockaddr* addr,
                                                    socklen_t* addrlen) {
  auto rs = lookup(socket);
  if (!rs) return fail(EBADF);
  if (!addrlen || (!addr && *addrlen)) return fail(EFAULT);
  if (rs->type == SOCK_DGRAM) return getpeername(rs->fd, addr, addrlen);
  Lock lock(rs->mutex);
  if (rs->phase != Phase::kConnected && rs->phase != Phase::kAccepting &&
      rs->phase != Phase::kConnecting)
    return fail(ENOTCONN);
  copy_address(rdma_get_peer_addr(rs->id), addr, addrlen);
  return 0;
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rgetsockname(int socket, struct sockaddr* addr,
                                                    socklen_t* addrlen) {
  auto rs = lookup(socket);
  if (!rs) return fail(EBADF);
  if (!addrlen || (!addr && *addrlen)) return fail(EFAULT);
  if (rs->type == SOCK_DGRAM) return getsockname(rs->fd, addr, addrlen);
  Lock lock(rs->mutex);
  const sockaddr* local = rdma_get_local_addr(rs->id);
  if (local->sa_family != AF_INET && local->sa_family != AF_INET6) {
    sockaddr_storage any{};
    any.ss_family = static_cast<sa_family_t>(rs->domain);
    copy_address(reinterpret_cast<sockaddr*>(&any), addr, addrlen);
    return 0;
  }
  copy_address(local, addr, addrlen);
  return 0;
}
