// rsockets: the send and receive families (C entry points). They check the
// socket and the arguments and hand over to the stream engine
// (rsocket_stream_io.cpp) or the datagram engine (rsocket_dgram.cpp).
#include <rdma/rsocket.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "c_boundary.h"
#include "rsocket_dgram.h"
#include "rsocket_stream.h"

using namespace sv::rdmacm;
using namespace sv::rdmacm::rs;

namespace {

constexpr int kMaxIov = 1024;  // IOV_MAX

ssize_t receive_on(int socket, const iovec* iov, int iovcnt, int flags, sockaddr* src,
                   socklen_t* src_len) {
  auto rs = lookup(socket);
  if (!rs) return fail_as<ssize_t>(EBADF);
  if (iovcnt < 0 || iovcnt > kMaxIov || (!iov && iovcnt)) return fail_as<ssize_t>(EINVAL);
  return guarded<ssize_t>(-1, [&] {
    if (rs->type == SOCK_DGRAM) return dgram_recv(*rs, iov, iovcnt, flags, src, src_len);
    ssize_t n = stream_recv(*rs, iov, iovcnt, flags);
    if (n >= 0 && src && src_len) rgetpeername(socket, src, src_len);
    return n;
  });
}

ssize_t send_on(int socket, const iovec* iov, int iovcnt, int flags, const sockaddr* dest,
                socklen_t dest_len) {
  auto rs = lookup(socket);
  if (!rs) return fail_as<ssize_t>(EBADF);
  if (iovcnt < 0 || iovcnt > kMaxIov || (!iov && iovcnt)) return fail_as<ssize_t>(EINVAL);
  return guarded<ssize_t>(-1, [&] {
    if (rs->type == SOCK_DGRAM) return dgram_send(*rs, iov, iovcnt, flags, dest, dest_len);
    if (dest) return fail_as<ssize_t>(EISCONN);
    return stream_send(*rs, iov, iovcnt, flags);
  });
}

}  // namespace

extern "C" SOFTVERBS_RDMACM_EXPORT ssize_t rrecv(int socket, void* buf, size_t len, int flags) {
  iovec iov{buf, len};
  return receive_on(socket, &iov, 1, flags, nullptr, nullptr);
}

extern "C" SOFTVERBS_RDMACM_EXPORT ssize_t rrecvfrom(int socket, void* buf, size_t len, int flags,
                                                     struct sockaddr* src_addr,
                                                     socklen_t* addrlen) {
  iovec iov{buf, len};
  return receive_on(socket, &iov, 1, flags, src_addr, addrlen);
}

extern "C" SOFTVERBS_RDMACM_EXPORT ssize_t rrecvmsg(int socket, struct msghdr* msg, int flags) {
  if (!msg) return fail_as<ssize_t>(EFAULT);
  if (msg->msg_control && msg->msg_controllen) return fail_as<ssize_t>(ENOTSUP);
  msg->msg_flags = 0;
  socklen_t len = msg->msg_namelen;
  ssize_t n = receive_on(socket, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags,
                         static_cast<sockaddr*>(msg->msg_name), msg->msg_name ? &len : nullptr);
  if (n >= 0 && msg->msg_name) msg->msg_namelen = len;
  return n;
}

extern "C" SOFTVERBS_RDMACM_EXPORT ssize_t rsend(int socket, const void* buf, size_t len,
                                                 int flags) {
  iovec iov{const_cast<void*>(buf), len};
  return send_on(socket, &iov, 1, flags, nullptr, 0);
}

extern "C" SOFTVERBS_RDMACM_EXPORT ssize_t rsendto(int socket, const void* buf, size_t len,
                                                   int flags, const struct sockaddr* dest_addr,
                                                   socklen_t addrlen) {
  iovec iov{const_cast<void*>(buf), len};
  auto rs = lookup(socket);
  // On a connected stream socket the address is ignored (as rdma-core).
  if (rs && rs->type == SOCK_STREAM) dest_addr = nullptr;
  return send_on(socket, &iov, 1, flags, dest_addr, addrlen);
}

extern "C" SOFTVERBS_RDMACM_EXPORT ssize_t rsendmsg(int socket, const struct msghdr* msg,
                                                    int flags) {
  if (!msg) return fail_as<ssize_t>(EFAULT);
  if (msg->msg_control && msg->msg_controllen) return fail_as<ssize_t>(ENOTSUP);
  auto rs = lookup(socket);
  const sockaddr* dest =
      rs && rs->type == SOCK_DGRAM ? static_cast<const sockaddr*>(msg->msg_name) : nullptr;
  return send_on(socket, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags, dest,
                 msg->msg_namelen);
}

extern "C" SOFTVERBS_RDMACM_EXPORT ssize_t rread(int socket, void* buf, size_t count) {
  return rrecv(socket, buf, count, 0);
}

extern "C" SOFTVERBS_RDMACM_EXPORT ssize_t rreadv(int socket, const struct iovec* iov, int iovcnt) {
  return receive_on(socket, iov, iovcnt, 0, nullptr, nullptr);
}

extern "C" SOFTVERBS_RDMACM_EXPORT ssize_t rwrite(int socket, const void* buf, size_t count) {
  return rsend(socket, buf, count, 0);
}

extern "C" SOFTVERBS_RDMACM_EXPORT ssize_t rwritev(int socket, const struct iovec* iov,
                                                   int iovcnt) {
  return send_on(socket, iov, iovcnt, 0, nullptr, 0);
}
