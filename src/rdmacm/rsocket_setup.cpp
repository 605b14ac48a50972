// rsockets: creating, connecting, closing and configuring a socket. Not
// implemented yet: every call returns -1 with errno EOPNOTSUPP.
#include <rdma/rsocket.h>

#include "c_boundary.hpp"

using namespace softverbs::rdmacm;

extern "C" SOFTVERBS_RDMACM_EXPORT int rsocket(int domain, int type, int protocol) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rbind(int socket, const struct sockaddr* addr,
                                             socklen_t addrlen) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rlisten(int socket, int backlog) { return fail(); }

extern "C" SOFTVERBS_RDMACM_EXPORT int raccept(int socket, struct sockaddr* addr,
                                               socklen_t* addrlen) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rconnect(int socket, const struct sockaddr* addr,
                                                socklen_t addrlen) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rshutdown(int socket, int how) { return fail(); }

extern "C" SOFTVERBS_RDMACM_EXPORT int rclose(int socket) { return fail(); }

extern "C" SOFTVERBS_RDMACM_EXPORT int rgetpeername(int socket, struct sockaddr* addr,
                                                    socklen_t* addrlen) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rgetsockname(int socket, struct sockaddr* addr,
                                                    socklen_t* addrlen) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rsetsockopt(int socket, int level, int optname,
                                                   const void* optval, socklen_t optlen) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rgetsockopt(int socket, int level, int optname,
                                                   void* optval, socklen_t* optlen) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rfcntl(int socket, int cmd, ... /* arg */) {
  return fail();
}
