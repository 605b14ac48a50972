#include "util/self_mem.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>
#include <new>

namespace sv {
namespace {

// Opened once; a fork child reopens it (the inherited descriptor still
// names the parent's memory).
std::atomic<int> g_fd{-1};
std::mutex g_open_mu;

int mem_fd() {
  int fd = g_fd.load(std::memory_order_acquire);
  if (fd >= 0) return fd;
  std::lock_guard g(g_open_mu);
  static bool atfork = (pthread_atfork(nullptr, nullptr, [] {
                          int old = g_fd.exchange(-1);
                          if (old >= 0) ::close(old);
                          new (&g_open_mu) std::mutex;
                        }),
                        true);
  (void)atfork;
  fd = g_fd.load(std::memory_order_relaxed);
  if (fd < 0) {
    fd = ::open("/proc/self/mem", O_RDWR | O_CLOEXEC);
    g_fd.store(fd, std::memory_order_release);
  }
  return fd;
}

// process_vm_readv/writev on ourselves: the kernel checks each page's
// protection as it pins it, without the FOLL_FORCE /proc/self/mem has.
template <typename Io>
bool transfer_as_mapped(uint64_t vaddr, size_t len, Io io) {
  const pid_t self = getpid();
  size_t done = 0;
  while (done < len) {
    ssize_t n = io(self, done, vaddr + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

template <typename Io>
bool transfer(uint64_t vaddr, size_t len, Io io) {
  int fd = mem_fd();
  if (fd < 0) return false;
  size_t done = 0;
  while (done < len) {
    ssize_t n = io(fd, done, static_cast<off_t>(vaddr + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

bool self_mem_read(void* dst, uint64_t vaddr, size_t len) {
  auto* d = static_cast<uint8_t*>(dst);
  return transfer(vaddr, len, [&](int fd, size_t done, off_t at) { return pread(fd, d + done, len - done, at); });
}

bool self_mem_write(uint64_t vaddr, const void* src, size_t len) {
  auto* s = static_cast<const uint8_t*>(src);
  return transfer(vaddr, len, [&](int fd, size_t done, off_t at) { return pwrite(fd, s + done, len - done, at); });
}

bool self_mem_read_as_mapped(void* dst, uint64_t vaddr, size_t len) {
  auto* d = static_cast<uint8_t*>(dst);
  return transfer_as_mapped(vaddr, len, [&](pid_t self, size_t done, uint64_t at) {
    iovec local{d + done, len - done}, remote{reinterpret_cast<void*>(at), len - done};
    return process_vm_readv(self, &local, 1, &remote, 1, 0);
  });
}

bool self_mem_write_as_mapped(uint64_t vaddr, const void* src, size_t len) {
  auto* s = static_cast<const uint8_t*>(src);
  return transfer_as_mapped(vaddr, len, [&](pid_t self, size_t done, uint64_t at) {
    iovec local{const_cast<uint8_t*>(s) + done, len - done}, remote{reinterpret_cast<void*>(at), len - done};
    return process_vm_writev(self, &local, 1, &remote, 1, 0);
  });
}

}  // namespace sv
