// File descriptors handed over a unix socket (SCM_RIGHTS), with a message.
// The host service gives each process its steered sockets and the port
// attestation table this way, and takes the sockets processes send from
// (util/host_service_socket.h). Header-only.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace sv {

inline constexpr int kMaxPassedFds = 8;

// Sends `len` bytes with `count` descriptors attached; false (errno) when
// the message did not go whole.
inline bool send_with_fds(int sock, const void* data, size_t len, const int* fds, int count, int flags = 0) {
  if (count < 0 || count > kMaxPassedFds) {
    errno = EINVAL;
    return false;
  }
  iovec iov{const_cast<void*>(data), len};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  if (count) {
    m.msg_control = control;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * count);
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * count);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * count);
  }
  for (;;) {
    const ssize_t n = sendmsg(sock, &m, flags | MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(len)) return true;
    if (n < 0 && errno == EINTR) continue;
    if (n >= 0) errno = EMSGSIZE;
    return false;
  }
}

// Receives one message (at most `cap` bytes) and the descriptors attached
// to it: the message's length, or -1 (errno), or 0 at end of stream. At
// most `max` descriptors go to fds[] (*count of them, close-on-exec); any
// beyond are closed, as are all of a truncated message's.
inline ssize_t receive_with_fds(int sock, void* buf, size_t cap, int* fds, int max, int* count, int flags = 0) {
  *count = 0;
  iovec iov{buf, cap};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = recvmsg(sock, &m, flags | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return n;
  const bool truncated = (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const int k = static_cast<int>((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    for (int i = 0; i < k; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (!truncated && *count < max) fds[(*count)++] = fd;
      else close(fd);
    }
  }
  if (truncated) {
    for (int i = 0; i < *count; ++i) close(fds[i]);
    *count = 0;
    errno = EMSGSIZE;
    return -1;
  }
  return n;
}

}  // namespace sv
