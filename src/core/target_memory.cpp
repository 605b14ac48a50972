#include "core/target_memory.h"

#include <sys/uio.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/bounce_path.h"
#include "shm/robust_mutex.h"
#include "util/knobs.h"
#include "util/self_mem.h"
#include "util/log.h"

namespace sv {
namespace {

// Peers (registry slot -> incarnation | kDenied) whose memory we may not
// reach with process_vm_readv/writev: a seccomp profile or the ptrace policy
// refused it once, so their bounce service is used from then on.
constexpr uint64_t kDenied = 1ull << 32;
std::atomic<uint64_t> g_cma_denied[shm::kMaxProcs];

bool cma_denied(const shm::Peer& owner) {
  return knobs().mem_path == MemPath::kBounce ||
         g_cma_denied[owner.slot].load(std::memory_order_relaxed) == (kDenied | owner.incarnation);
}

// After a failed process_vm_* call: true (and remembered) if it was refused
// rather than failed (EPERM: ptrace policy or seccomp; ENOSYS: seccomp).
bool note_if_denied(const shm::Peer& owner, const char* call) {
  if (errno != EPERM && errno != ENOSYS && errno != EACCES) return false;
  SV_INFO("%s on pid %d is denied (%s): its bounce service copies instead", call, owner.pid, strerror(errno));
  g_cma_denied[owner.slot].store(kDenied | owner.incarnation, std::memory_order_relaxed);
  return true;
}

}  // namespace

bool write_to_mr_slow(const shm::Peer& owner, const MrView& mr, uint64_t addr, const void* src, size_t len) {
  if (owner.self) {
    // On-demand pages may be absent: a failed copy, not a fault.
    if (__builtin_expect(mr.path == shm::kMrOdp, 0)) return self_mem_write_as_mapped(mr.owner_vaddr(addr), src, len);
    place_bytes(reinterpret_cast<void*>(mr.owner_vaddr(addr)), src, len);
    return true;
  }
  if (!cma_denied(owner)) {
    iovec local{const_cast<void*>(src), len};
    iovec remote{reinterpret_cast<void*>(mr.owner_vaddr(addr)), len};
    ssize_t n = process_vm_writev(owner.pid, &local, 1, &remote, 1, 0);
    if (n == static_cast<ssize_t>(len)) return true;
    if (n >= 0 || !note_if_denied(owner, "process_vm_writev")) {
      SV_INFO("process_vm_writev to pid %d failed: %s", owner.pid, n < 0 ? strerror(errno) : "partial");
      return false;
    }
  }
  return bounce_copy(owner, shm::kBounceWrite, mr.key, addr, const_cast<void*>(src), len);
}

bool read_from_mr_slow(const shm::Peer& owner, const MrView& mr, uint64_t addr, void* dst, size_t len) {
  if (owner.self) {
    if (__builtin_expect(mr.path == shm::kMrOdp, 0)) return self_mem_read_as_mapped(dst, mr.owner_vaddr(addr), len);
    copy_bytes(dst, reinterpret_cast<const void*>(mr.owner_vaddr(addr)), len);
    return true;
  }
  if (!cma_denied(owner)) {
    iovec local{dst, len};
    iovec remote{reinterpret_cast<void*>(mr.owner_vaddr(addr)), len};
    ssize_t n = process_vm_readv(owner.pid, &local, 1, &remote, 1, 0);
    if (n == static_cast<ssize_t>(len)) return true;
    if (n >= 0 || !note_if_denied(owner, "process_vm_readv")) {
      SV_INFO("process_vm_readv from pid %d failed: %s", owner.pid, n < 0 ? strerror(errno) : "partial");
      return false;
    }
  }
  return bounce_copy(owner, shm::kBounceRead, mr.key, addr, dst, len);
}

namespace {

uint64_t apply_atomic(uint64_t* word, ibv_wr_opcode op, uint64_t compare_add, uint64_t swap) {
  if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) return __atomic_fetch_add(word, compare_add, __ATOMIC_SEQ_CST);
  uint64_t expected = compare_add;
  __atomic_compare_exchange_n(word, &expected, swap, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expected;  // the value found, swapped or not
}

}  // namespace

bool atomic_on_mr(const shm::Peer& owner, shm::RegistryHeader& registry, const MrView& mr, uint64_t addr,
                  ibv_wr_opcode op, uint64_t compare_add, uint64_t swap, uint64_t* original) {
  if (mr.path != shm::kMrCma && mr.path != shm::kMrOdp) {
    uint8_t* p = owner.self && mr.path != shm::kMrOverlay ? reinterpret_cast<uint8_t*>(mr.owner_vaddr(addr))
                                                          : overlay_ptr(owner, mr, addr, 8);
    if (!p) return false;
    *original = apply_atomic(reinterpret_cast<uint64_t*>(p), op, compare_add, swap);
    return true;
  }
  // Not shared with us (or on-demand pages that may be absent): read,
  // modify and write back under the lock that every atomic on this address
  // takes, whoever issues it.
  uint64_t vaddr = mr.owner_vaddr(addr);
  size_t stripe = ((vaddr >> 3) ^ (uint64_t{owner.slot} * 0x9e3779b97f4a7c15ull)) % shm::kAtomicLockStripes;
  shm::RobustLock lock(&registry.atomic_locks[stripe]);
  uint64_t value;
  if (!read_from_mr(owner, mr, addr, &value, 8)) return false;
  *original = value;
  if (op == IBV_WR_ATOMIC_FETCH_AND_ADD)
    value += compare_add;
  else if (value == compare_add)
    value = swap;
  else
    return true;
  return write_to_mr(owner, mr, addr, &value, 8);
}

}  // namespace sv
