// rsockets: data transfer and readiness (send/recv families, rpoll,
// rselect). Not implemented yet: every call returns -1 with errno EOPNOTSUPP.
#include <rdma/rsocket.h>

#include <sys/types.h>

#include "c_boundary.hpp"

using namespace softverbs::rdmacm;

extern "C" SOFTVERBS_RDMACM_EXPORT ssize_t rrecv(int socket, void* buf, size_t len, int flags) {
  return fail_as<ssize_t>();
}

extern "C" SOFTVERBS_RDMACM_EXPORT ssize_t rrecvfrom(int socket, void* buf, size_t len, int flags,
                                                     struct sockaddr* src_addr,
                                                     socklen_t* addrlen) {
  return fail_as<ssize_t>();
}

extern "C" SOFTVERBS_RDMACM_EXPORT ssize_t rrecvmsg(int socket, struct msghdr* msg, int flags) {
  return fail_as<ssize_t>();
}

extern "C" SOFTVERBS_RDMACM_EXPORT ssize_t rsend(int socket, const void* buf, size_t len,
                                                 int flags) {
  return fail_as<ssize_t>();
}

extern "C" SOFTVERBS_RDMACM_EXPORT ssize_t rsendto(int socket, const void* buf, size_t len,
                                                   int flags, const struct sockaddr* dest_addr,
                                                   socklen_t addrlen) {
  return fail_as<ssize_t>();
}

extern "C" SOFTVERBS_RDMACM_EXPORT ssize_t rsendmsg(int socket, const struct msghdr* msg,
                                                    int flags) {
  return fail_as<ssize_t>();
}

extern "C" SOFTVERBS_RDMACM_EXPORT ssize_t rread(int socket, void* buf, size_t count) {
  return fail_as<ssize_t>();
}

extern "C" SOFTVERBS_RDMACM_EXPORT ssize_t rreadv(int socket, const struct iovec* iov,
                                                  int iovcnt) {
  return fail_as<ssize_t>();
}

extern "C" SOFTVERBS_RDMACM_EXPORT ssize_t rwrite(int socket, const void* buf, size_t count) {
  return fail_as<ssize_t>();
}

extern "C" SOFTVERBS_RDMACM_EXPORT ssize_t rwritev(int socket, const struct iovec* iov,
                                                   int iovcnt) {
  return fail_as<ssize_t>();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rpoll(struct pollfd* fds, nfds_t nfds, int timeout) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rselect(int nfds, fd_set* readfds, fd_set* writefds,
                                               fd_set* exceptfds, struct timeval* timeout) {
  return fail();
}
