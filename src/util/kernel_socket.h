// socket(2) straight from the kernel, past any interposer. Programs run
// under LD_PRELOAD=librspreload.so (or similar) have socket() turned into
// rsocket(); the sockets softverbs itself needs (RoCEv2's UDP port, the
// CM's MAD socket, route lookups, datagram rsockets' UDP side) must stay
// kernel sockets, or the library would recurse into itself.
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

namespace sv {

inline int kernel_socket(int domain, int type, int protocol) {
  return static_cast<int>(syscall(SYS_socket, domain, type, protocol));
}

}  // namespace sv
