#include "core/target_memory.h"

#include <sys/uio.h>

#include <cstring>

#include "util/log.h"

namespace sv {
namespace {

// Where `addr` of an overlaid MR is in our mapping of the owner's arena.
uint8_t* overlay_ptr(const shm::Peer& owner, const MrView& mr, uint64_t addr, size_t len) {
  uint64_t vaddr = mr.owner_vaddr(addr);
  if (vaddr < mr.overlay_page) return nullptr;
  uint64_t off = mr.overlay_off + (vaddr - mr.overlay_page);
  return owner.contains(off, len) ? owner.base + off : nullptr;
}

}  // namespace

bool write_to_mr(const shm::Peer& owner, const MrView& mr, uint64_t addr, const void* src, size_t len) {
  if (len == 0) return true;
  if (owner.self) {
    std::memcpy(reinterpret_cast<void*>(mr.owner_vaddr(addr)), src, len);
    return true;
  }
  if (mr.path == shm::kMrOverlay) {
    uint8_t* p = overlay_ptr(owner, mr, addr, len);
    if (!p) return false;
    std::memcpy(p, src, len);
    return true;
  }
  iovec local{const_cast<void*>(src), len};
  iovec remote{reinterpret_cast<void*>(mr.owner_vaddr(addr)), len};
  ssize_t n = process_vm_writev(owner.pid, &local, 1, &remote, 1, 0);
  if (n != static_cast<ssize_t>(len)) {
    SV_INFO("process_vm_writev to pid %d failed: %s", owner.pid, strerror(errno));
    return false;
  }
  return true;
}

bool read_from_mr(const shm::Peer& owner, const MrView& mr, uint64_t addr, void* dst, size_t len) {
  if (len == 0) return true;
  if (owner.self) {
    std::memcpy(dst, reinterpret_cast<const void*>(mr.owner_vaddr(addr)), len);
    return true;
  }
  if (mr.path == shm::kMrOverlay) {
    uint8_t* p = overlay_ptr(owner, mr, addr, len);
    if (!p) return false;
    std::memcpy(dst, p, len);
    return true;
  }
  iovec local{dst, len};
  iovec remote{reinterpret_cast<void*>(mr.owner_vaddr(addr)), len};
  ssize_t n = process_vm_readv(owner.pid, &local, 1, &remote, 1, 0);
  if (n != static_cast<ssize_t>(len)) {
    SV_INFO("process_vm_readv from pid %d failed: %s", owner.pid, strerror(errno));
    return false;
  }
  return true;
}

}  // namespace sv
