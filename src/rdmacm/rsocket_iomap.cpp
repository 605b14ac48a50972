// rsockets: direct data placement (riomap / riounmap / riowrite). Not
// implemented yet: riomap and riounmap return -1, riowrite returns
// (size_t)-1 as rdma-core does on error; errno is EOPNOTSUPP.
#include <rdma/rsocket.h>

#include <sys/types.h>

#include "c_boundary.hpp"

using namespace softverbs::rdmacm;

extern "C" SOFTVERBS_RDMACM_EXPORT off_t riomap(int socket, void* buf, size_t len, int prot,
                                                int flags, off_t offset) {
  return fail_as<off_t>();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int riounmap(int socket, void* buf, size_t len) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT size_t riowrite(int socket, const void* buf, size_t count,
                                                   off_t offset, int flags) {
  return fail_as<size_t>();
}
