// rsockets: rsetsockopt, rgetsockopt and rfcntl. Sizes (SOL_RDMA, buffer
// sizes) take effect at connect/accept time, as with rdma-core; options
// without a meaning here (keepalive, TCP_NODELAY, ...) are kept and
// reported back so that programs written for TCP keep working.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include <algorithm>
#include <cstdarg>
#include <cstring>

#include "c_boundary.h"
#include "rsocket_stream.h"

using namespace sv::rdmacm;
using namespace sv::rdmacm::rs;

namespace {

int int_value(const void* optval, socklen_t optlen, int* out) {
  if (!optval || optlen < sizeof(int)) return fail(EINVAL);
  std::memcpy(out, optval, sizeof(int));
  return 0;
}

int put_value(void* optval, socklen_t* optlen, const void* value, socklen_t len) {
  if (!optval || !optlen) return fail(EFAULT);
  std::memcpy(optval, value, std::min(*optlen, len));
  *optlen = std::min(*optlen, len);
  return 0;
}

int put_int(void* optval, socklen_t* optlen, int value) {
  return put_value(optval, optlen, &value, sizeof value);
}

bool sizes_frozen(const RSocket& rs) {
  return rs.type == SOCK_STREAM && rs.phase != Phase::kIdle && rs.phase != Phase::kBound &&
         rs.phase != Phase::kListening;
}

int set_socket_level(RSocket& rs, int optname, const void* optval, socklen_t optlen) {
  int v = 0;
  switch (optname) {
    case SO_REUSEADDR: {
      if (int_value(optval, optlen, &v)) return -1;
      if (rs.type == SOCK_DGRAM) return setsockopt(rs.fd, SOL_SOCKET, optname, optval, optlen);
      if (rdma_set_option(rs.id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &v, sizeof v) != 0 &&
          rs.phase == Phase::kIdle)
        return -1;
      rs.opt.reuseaddr = v != 0;
      return 0;
    }
    case SO_KEEPALIVE:
      if (int_value(optval, optlen, &v)) return -1;
      rs.opt.keepalive = v != 0;
      return 0;
    case SO_RCVBUF:
    case SO_SNDBUF:
      if (int_value(optval, optlen, &v)) return -1;
      if (v <= 0) return fail(EINVAL);
      if (rs.type == SOCK_DGRAM) return setsockopt(rs.fd, SOL_SOCKET, optname, optval, optlen);
      if (sizes_frozen(rs)) return 0;  // as TCP after connect: accepted, no effect
      (optname == SO_RCVBUF ? rs.opt.rbuf_size : rs.opt.sbuf_size) = static_cast<uint32_t>(v);
      return 0;
    case SO_LINGER:
      if (!optval || optlen < sizeof(linger)) return fail(EINVAL);
      std::memcpy(&rs.opt.linger_value, optval, sizeof(linger));
      return 0;
    default:
      return fail(ENOTSUP);
  }
}

int get_socket_level(RSocket& rs, int optname, void* optval, socklen_t* optlen) {
  switch (optname) {
    case SO_REUSEADDR:
      return put_int(optval, optlen, rs.opt.reuseaddr);
    case SO_KEEPALIVE:
      return put_int(optval, optlen, rs.opt.keepalive);
    case SO_RCVBUF:
      if (rs.type == SOCK_DGRAM) return getsockopt(rs.fd, SOL_SOCKET, SO_RCVBUF, optval, optlen);
      return put_int(optval, optlen,
                     static_cast<int>(rs.ring.size() ? rs.ring.size() : rs.opt.rbuf_size));
    case SO_SNDBUF:
      if (rs.type == SOCK_DGRAM) return getsockopt(rs.fd, SOL_SOCKET, SO_SNDBUF, optval, optlen);
      return put_int(optval, optlen,
                     static_cast<int>(rs.staging.size() ? rs.staging.size() : rs.opt.sbuf_size));
    case SO_LINGER:
      return put_value(optval, optlen, &rs.opt.linger_value, sizeof(linger));
    case SO_ERROR: {
      if (rs.type == SOCK_DGRAM) return getsockopt(rs.fd, SOL_SOCKET, SO_ERROR, optval, optlen);
      Lock lock(rs.mutex);
      pump_cm(rs);
      int err = rs.so_error;
      rs.so_error = 0;
      return put_int(optval, optlen, err);
    }
    default:
      return fail(ENOTSUP);
  }
}

int set_tcp_level(RSocket& rs, int optname, const void* optval, socklen_t optlen) {
  int v = 0;
  if (int_value(optval, optlen, &v)) return -1;
  switch (optname) {
    case TCP_NODELAY:
      rs.opt.nodelay = v != 0;
      return 0;
    case TCP_MAXSEG:
      if (v <= 0) return fail(EINVAL);
      rs.opt.maxseg = v;
      return 0;
    case TCP_KEEPIDLE:
      if (v <= 0) return fail(EINVAL);
      rs.opt.keepidle = v;
      return 0;
    default:
      return fail(ENOTSUP);
  }
}

int get_tcp_level(RSocket& rs, int optname, void* optval, socklen_t* optlen) {
  switch (optname) {
    case TCP_NODELAY:
      return put_int(optval, optlen, rs.opt.nodelay);
    case TCP_MAXSEG:
      return put_int(optval, optlen, rs.opt.maxseg);
    case TCP_KEEPIDLE:
      return put_int(optval, optlen, rs.opt.keepidle);
    default:
      return fail(ENOTSUP);
  }
}

int set_rdma_level(RSocket& rs, int optname, const void* optval, socklen_t optlen) {
  if (optname == RDMA_ROUTE) {
    // Path records come from our own route resolution; a given route is
    // accepted (rdma-core hands it to the CM) and not needed here.
    if (!optval || optlen == 0) return fail(EINVAL);
    return 0;
  }
  int v = 0;
  if (int_value(optval, optlen, &v)) return -1;
  if (sizes_frozen(rs)) return fail(EINVAL);  // rdma-core: only before connecting
  if (v < 0) return fail(EINVAL);
  const uint32_t u = static_cast<uint32_t>(v);
  switch (optname) {
    case RDMA_SQSIZE:
      rs.opt.sq_size = std::max(u, 1u);
      return 0;
    case RDMA_RQSIZE:
      rs.opt.rq_size = std::max(u, 1u);
      return 0;
    case RDMA_INLINE:
      rs.opt.inline_size = u;
      return 0;
    case RDMA_IOMAPSIZE:
      rs.opt.iomap_slots = u;
      return 0;
    default:
      return fail(ENOTSUP);
  }
}

int get_rdma_level(RSocket& rs, int optname, void* optval, socklen_t* optlen) {
  switch (optname) {
    case RDMA_SQSIZE:
      return put_int(optval, optlen, static_cast<int>(rs.sq_size ? rs.sq_size : rs.opt.sq_size));
    case RDMA_RQSIZE:
      return put_int(optval, optlen, static_cast<int>(rs.rq_size ? rs.rq_size : rs.opt.rq_size));
    case RDMA_INLINE:
      return put_int(optval, optlen, static_cast<int>(rs.cq ? rs.inline_size : rs.opt.inline_size));
    case RDMA_IOMAPSIZE:
      return put_int(optval, optlen, static_cast<int>(rs.opt.iomap_slots));
    case RDMA_ROUTE: {
      if (rs.type != SOCK_STREAM || !rs.id || !rs.id->route.path_rec || !rs.id->route.num_paths)
        return fail(ENODATA);
      return put_value(optval, optlen, rs.id->route.path_rec,
                       static_cast<socklen_t>(sizeof(ibv_sa_path_rec) * rs.id->route.num_paths));
    }
    default:
      return fail(ENOTSUP);
  }
}

}  // namespace

extern "C" SOFTVERBS_RDMACM_EXPORT int rsetsockopt(int socket, int level, int optname,
                                                   const void* optval, socklen_t optlen) {
  auto rs = lookup(socket);
  if (!rs) return fail(EBADF);
  return guarded(-1, [&] {
    switch (level) {
      case SOL_SOCKET:
        return set_socket_level(*rs, optname, optval, optlen);
      case IPPROTO_TCP:
        if (rs->type != SOCK_STREAM) return fail(ENOTSUP);
        return set_tcp_level(*rs, optname, optval, optlen);
      case IPPROTO_IPV6: {
        if (optname != IPV6_V6ONLY) return fail(ENOTSUP);
        int v = 0;
        if (int_value(optval, optlen, &v)) return -1;
        if (rs->type == SOCK_DGRAM) return setsockopt(rs->fd, level, optname, optval, optlen);
        if (rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &v, sizeof v) != 0)
          return -1;
        rs->opt.v6only = v != 0;
        return 0;
      }
      case SOL_RDMA:
        return set_rdma_level(*rs, optname, optval, optlen);
      default:
        return fail(ENOTSUP);
    }
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rgetsockopt(int socket, int level, int optname, void* optval,
                                                   socklen_t* optlen) {
  auto rs = lookup(socket);
  if (!rs) return fail(EBADF);
  return guarded(-1, [&] {
    switch (level) {
      case SOL_SOCKET:
        return get_socket_level(*rs, optname, optval, optlen);
      case IPPROTO_TCP:
        if (rs->type != SOCK_STREAM) return fail(ENOTSUP);
        return get_tcp_level(*rs, optname, optval, optlen);
      case IPPROTO_IPV6:
        if (optname != IPV6_V6ONLY) return fail(ENOTSUP);
        if (rs->type == SOCK_DGRAM) return getsockopt(rs->fd, level, optname, optval, optlen);
        return put_int(optval, optlen, rs->opt.v6only);
      case SOL_RDMA:
        return get_rdma_level(*rs, optname, optval, optlen);
      default:
        return fail(ENOTSUP);
    }
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rfcntl(int socket, int cmd, ... /* arg */) {
  auto rs = lookup(socket);
  if (!rs) return fail(EBADF);
  va_list args;
  va_start(args, cmd);
  int result;
  switch (cmd) {
    case F_GETFL:
      result = rs->fd_flags;  // as rdma-core: the flags rfcntl set
      break;
    case F_SETFL: {
      int flags = va_arg(args, int);
      rs->fd_flags = flags & O_NONBLOCK;
      result = 0;
      break;
    }
    default:
      result = fail(ENOTSUP);
      break;
  }
  va_end(args);
  return result;
}
