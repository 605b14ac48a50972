#include "core/bounce_path.h"

#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "core/mr.h"
#include "shm/doorbell.h"
#include "shm/shared_lock.h"
#include "util/bits.h"
#include "util/log.h"
#include "util/self_mem.h"
#include "util/private_heap.h"

namespace sv {
namespace {

long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

// ------------------------------------------------------------ the service

// Peers write into memory registered for local write (receive buffers, and
// the targets of RDMA WRITE and atomics, which need it too) and read memory
// that an RDMA READ or an atomic may read.
bool allowed(const MrView& v, uint32_t op) {
  if (op == shm::kBounceWrite) return v.access & IBV_ACCESS_LOCAL_WRITE;
  if (op == shm::kBounceRead) return v.access & (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
  return false;
}

class Service : public PrivateHeapObject {
 public:
  Service(shm::Host& host, shm::Doorbell bell) : host_(host), bell_(bell) {}

  void run() {
    pthread_setname_np(pthread_self(), "softverbs-bounce");
    shm::BounceShared* shared = host_.arena().bounce();
    const shm::RegistryHeader& registry = *host_.peers().registry().header();
    for (;;) {
      pollfd p{bell_.read_fd(), POLLIN, 0};
      poll(&p, 1, -1);
      // Drained before the scan: a request posted after it rings again.
      bell_.drain();
      for (shm::BounceSlot& s : shared->slots) {
        uint32_t holder = s.holder.load(std::memory_order_acquire);
        if (!holder) continue;
        if (s.state.load(std::memory_order_acquire) == shm::kBouncePosted) {
          serve(s, holder);
        } else if (shm::lock_holder_dead(registry, holder)) {
          // A requester that died holding a slot: free it for the others.
          s.state.store(shm::kBounceIdle, std::memory_order_relaxed);
          s.holder.store(0, std::memory_order_release);
        }
      }
    }
  }

 private:
  void serve(shm::BounceSlot& s, uint32_t holder) {
    const uint32_t op = s.op, key = s.key;
    const uint64_t addr = s.addr, len = s.len, staging_off = s.staging_off;
    // Everything in the slot is a peer's word: check it all.
    const shm::Peer* requester = host_.peers().get(shm::lock_owner_slot(holder));
    bool ok = requester && shm::lock_owner_is(holder, requester->incarnation) &&
              len <= shm::kBounceChunk && requester->contains(staging_off, len);
    MrView v;
    ok = ok && read_mr(host_.arena().mr_table(), key, &v) &&
         (v.path == shm::kMrCma || v.path == shm::kMrOdp) && allowed(v, op) && v.covers(addr, len);
    // Memory the application unmapped after registering it (or an
    // on-demand MR never mapped) fails the request instead of faulting
    // this thread. An on-demand MR sees the pages as they are mapped now.
    uint8_t* staging = ok ? requester->base + staging_off : nullptr;
    const uint64_t at = ok ? v.owner_vaddr(addr) : 0;
    if (ok && v.path == shm::kMrOdp)
      ok = op == shm::kBounceWrite ? self_mem_write_as_mapped(at, staging, len) : self_mem_read_as_mapped(staging, at, len);
    else if (ok)
      ok = op == shm::kBounceWrite ? self_mem_write(at, staging, len) : self_mem_read(staging, at, len);
    if (!ok) SV_INFO("bounce service: request for key %#x [%#lx, +%lu) refused", key, addr, len);
    s.state.store(ok ? shm::kBounceDone : shm::kBounceFailed, std::memory_order_release);
    futex(&s.state, FUTEX_WAKE, INT_MAX, nullptr);
  }

  shm::Host& host_;
  shm::Doorbell bell_;
};

std::mutex g_start_mu;
shm::Host* g_served = nullptr;  // the host whose service runs (a fork child has none)

// ------------------------------------------------------------ requesters

// Staging buffers in our own arena (the owner's thread maps it), reused.
struct StagingPool {
  std::mutex mu;
  shm::Host* host = nullptr;
  PrivateVector<uint64_t> free;
};
StagingPool g_staging;

uint64_t take_staging(shm::Host& host) {
  std::lock_guard g(g_staging.mu);
  if (g_staging.host != &host) {  // a fork child: the parent's buffers are not ours
    g_staging.free.clear();
    g_staging.host = &host;
  }
  if (g_staging.free.empty()) return host.arena().alloc(shm::kBounceChunk);
  uint64_t off = g_staging.free.back();
  g_staging.free.pop_back();
  return off;
}

void give_staging(uint64_t off) {
  std::lock_guard g(g_staging.mu);
  g_staging.free.push_back(off);
}

// A free slot of the owner's service, taken by `me`; nullptr if the owner died.
shm::BounceSlot* claim_slot(shm::BounceShared& shared, uint32_t me, const shm::Peer& owner) {
  for (;;) {
    for (shm::BounceSlot& s : shared.slots) {
      uint32_t expected = 0;
      if (s.holder.load(std::memory_order_relaxed) == 0 &&
          s.holder.compare_exchange_strong(expected, me, std::memory_order_acquire))
        return &s;
    }
    if (!owner.alive()) return nullptr;
    sched_yield();
  }
}

// The slot's final state; kBouncePosted if the owner died first.
uint32_t wait_done(shm::BounceSlot& s, const shm::Peer& owner) {
  for (int i = 0; i < 2000; ++i) {
    uint32_t st = s.state.load(std::memory_order_acquire);
    if (st != shm::kBouncePosted) return st;
    cpu_relax();
  }
  const timespec tick{0, 10'000'000};
  for (;;) {
    uint32_t st = s.state.load(std::memory_order_acquire);
    if (st != shm::kBouncePosted) return st;
    if (!owner.alive()) return shm::kBouncePosted;
    futex(&s.state, FUTEX_WAIT, shm::kBouncePosted, &tick);
  }
}

}  // namespace

void start_bounce_service(shm::Host& host) {
  std::lock_guard g(g_start_mu);
  if (g_served == &host) return;
  static bool atfork = (pthread_atfork(nullptr, nullptr, [] { g_served = nullptr; }), true);
  (void)atfork;
  shm::Doorbell bell;
  if (!bell.open(host.arena())) {
    SV_WARN("bounce service: no doorbell (%s): peers denied process_vm_* cannot reach this process's memory",
            strerror(errno));
    return;
  }
  auto* service = new Service(host, bell);  // lives as long as the process
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // signals stay with the application's threads
  std::thread([service] { service->run(); }).detach();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  shm::BounceShared* shared = host.arena().bounce();
  shared->doorbell_gen.store(bell.gen(), std::memory_order_relaxed);
  shared->doorbell.store(bell.index() + 1, std::memory_order_release);
  g_served = &host;
}

bool bounce_copy(const shm::Peer& owner, shm::BounceOp op, uint32_t key, uint64_t addr, void* buf,
                 uint64_t len) {
  shm::Host* host = shm::Host::get();
  auto* shared = owner.at<shm::BounceShared>(owner.header()->bounce);
  if (!host || !shared) return false;
  const uint32_t bell = shared->doorbell.load(std::memory_order_acquire);
  const uint32_t bell_gen = shared->doorbell_gen.load();
  if (!bell) {
    SV_INFO("pid %d has no bounce service: its memory is out of reach", owner.pid);
    return false;
  }
  const uint64_t staging_off = take_staging(*host);
  if (!staging_off) return false;
  uint8_t* staging = host->arena().base() + staging_off;
  auto* bytes = static_cast<uint8_t*>(buf);
  const uint32_t me = shm::lock_owner_id(host->slot(), host->incarnation());
  bool ok = true;
  for (uint64_t done = 0; ok && done < len;) {
    const uint64_t n = std::min<uint64_t>(len - done, shm::kBounceChunk);
    if (op == shm::kBounceWrite) std::memcpy(staging, bytes + done, n);
    shm::BounceSlot* s = claim_slot(*shared, me, owner);
    if (!s) {
      ok = false;
      break;
    }
    s->op = op;
    s->key = key;
    s->addr = addr + done;
    s->len = n;
    s->staging_off = staging_off;
    s->state.store(shm::kBouncePosted, std::memory_order_release);
    if (!host->peers().ring_doorbell(owner, bell - 1, bell_gen)) {  // its bounce service is gone
      SV_INFO("pid %d has no bounce service: its memory is out of reach", owner.pid);
      s->state.store(shm::kBounceIdle, std::memory_order_relaxed);
      s->holder.store(0, std::memory_order_release);
      ok = false;
      break;
    }
    const uint32_t result = wait_done(*s, owner);
    if (result == shm::kBouncePosted) {  // the owner died: its slots died with it
      ok = false;
      break;
    }
    s->state.store(shm::kBounceIdle, std::memory_order_relaxed);
    s->holder.store(0, std::memory_order_release);
    ok = result == shm::kBounceDone;
    if (ok && op == shm::kBounceRead) std::memcpy(bytes + done, staging, n);
    done += n;
  }
  give_staging(staging_off);
  return ok;
}

}  // namespace sv
