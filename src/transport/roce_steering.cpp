#include "transport/roce_steering.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/log.h"

namespace sv::roce {

bool SteeredFlows::known(const DatagramInfo& info) const {
  const size_t n = count_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < n; ++i)
    if (flows_[i].remote_port == info.src_port && std::memcmp(&flows_[i].remote, &info.src, sizeof info.src) == 0 &&
        std::memcmp(&flows_[i].local, &info.dst, sizeof info.dst) == 0)
      return true;
  return false;
}

bool SteeredFlows::steer(const DatagramInfo& info) {
  if (refused_ || known(info)) return false;
  const size_t n = count_.load(std::memory_order_relaxed);
  if (n == kMax) {
    refused_ = true;
    SV_DEBUG("%zu RoCEv2 flows steered to this process: later ones keep being forwarded", kMax);
    return false;
  }
  const int fd = connected_roce_socket(info.dst, info.src, info.src_port);
  if (fd < 0) {
    // EADDRINUSE: the port's holder does not share it with us. Anything
    // else (out of descriptors) would fail again for the next flow as well.
    refused_ = true;
    SV_DEBUG("no socket for a RoCEv2 flow of its own (%s): this process's packets keep being forwarded to it",
             strerror(errno));
    return false;
  }
  flows_[n] = Flow{info.dst, info.src, info.src_port};
  fds_[n].store(fd, std::memory_order_relaxed);
  count_.store(n + 1, std::memory_order_release);
  return true;
}

void SteeredFlows::close() {
  const size_t n = count_.exchange(0, std::memory_order_acq_rel);
  for (size_t i = 0; i < n; ++i) {
    const int fd = fds_[i].exchange(-1, std::memory_order_relaxed);
    if (fd >= 0) ::close(fd);
  }
  refused_ = false;
}

}  // namespace sv::roce
