#include "shm/host.h"

#include <pthread.h>
#include <sys/prctl.h>

#include <atomic>
#include <cerrno>
#include <mutex>

#include "shm/fd_lender.h"
#include "shm/keeper.h"
#include "shm/robust_mutex.h"
#include "shm/runtime_dir.h"
#include "util/knobs.h"
#include "util/log.h"

namespace sv::shm {
namespace {

std::mutex g_attach_mu;
// Set once under g_attach_mu (and forgotten in a fork()ed child); read
// without it: every packet the RoCE engine takes asks for it twice.
std::atomic<Host*> g_host{nullptr};
std::atomic<uint32_t> g_fork_generation{0};

void before_fork() {
  g_attach_mu.lock();
  if (Host* h = g_host.load(std::memory_order_relaxed)) h->overlays().prepare_fork();
}

void after_fork_in_parent() {
  if (Host* h = g_host.load(std::memory_order_relaxed)) h->overlays().parent_after_fork();
  g_attach_mu.unlock();
}

void forget_host_in_child() {
  // Registered memory becomes ordinary private memory of the child. This
  // comes first: until it is done, heap pages may be missing in the child.
  restore_overlays_in_fork_child();
  // The child inherits none of our queues (MADV_DONTFORK) and no keeper
  // thread; verbs objects of the parent are unusable in it, as with a NIC.
  // The parent's Host (whose overlay lock the parent holds) is abandoned;
  // its connection to the host service, which holds the parent's lease,
  // is closed here (the child gets its own slot and lease).
  if (Host* h = g_host.load(std::memory_order_relaxed); h && h->service()) h->service()->abandon();
  g_host.store(nullptr, std::memory_order_relaxed);
  g_joined_registry.store(nullptr, std::memory_order_relaxed);  // (not mapped in a child: MADV_DONTFORK)
  new (&g_attach_mu) std::mutex;
  keeper_forget_after_fork();
  g_fork_generation.fetch_add(1, std::memory_order_release);
}

// Registered at load time, before the application can register its own
// handlers: prepare handlers run in reverse order of registration, so ours
// runs last (the snapshot of registered pages is as close to the fork as it
// can be), and child handlers in order, so ours runs first (other handlers
// in the child may touch heap pages that are missing until it has run).
__attribute__((constructor)) void register_fork_handlers() {
  pthread_atfork(before_fork, after_fork_in_parent, forget_host_in_child);
}

}  // namespace

Host::Host(Registry* r, Arena* a, uint32_t slot, uint32_t incarnation, std::unique_ptr<HostService> service)
    : registry_(r),
      names_(r->header()),
      arena_(a),
      slot_(slot),
      incarnation_(incarnation),
      service_(service.release()),
      overlays_(*a),
      peers_(*r, *a, slot) {}

Host* Host::get() {
  if (Host* h = g_host.load(std::memory_order_acquire)) return h;
  std::lock_guard g(g_attach_mu);
  if (Host* h = g_host.load(std::memory_order_relaxed)) return h;
  Registry* reg = Registry::open_or_create();
  if (!reg) return nullptr;
  Arena* arena = Arena::create(knobs().arena_bytes);
  if (!arena) {
    SV_ERROR("cannot create the shared arena: %s", strerror(errno));
    return nullptr;
  }
  // With a host service, a slot must also be free on the whole host: its
  // number is in our QPNs, which name one QP on the host.
  bool unreachable = false;
  std::unique_ptr<HostService> service = HostService::connect(&unreachable);
  if (unreachable) {  // (said by connect)
    errno = EAGAIN;
    return nullptr;
  }
  // Lending before a slot makes us visible (without it peers still have
  // /proc: start_fd_lender says why).
  start_fd_lender();
  uint32_t refused = 0;
  bool refused_by_service = false;
  auto may_take = [&](uint32_t s) {
    uint32_t holder;
    if (refused_by_service) return false;
    // The service steers datagrams by the slot in a QPN's home block
    // (hostd/datagram_route.h): it leases only slots that have home blocks.
    if (service && s >= kHomeSlots) return false;
    if (!service || service->lease(s, &holder)) return true;
    if (holder == HostService::kRefusedByService) {  // (said by lease)
      refused_by_service = true;
      return false;
    }
    if (holder == UINT32_MAX) {  // the service is gone or stuck
      SV_WARN("the host service did not lease a slot: working without it");
      service.reset();
      return true;
    }
    SV_DEBUG("registry slot %u is leased to uid %u on this host", s, holder);
    ++refused;
    return false;
  };
  // The claim runs on the keeper (shm/keeper.h), which then holds the
  // slot's liveness mutex for the life of the process: locked there at
  // once, just made free under the claims lock.
  auto lock_here = [](pthread_mutex_t* m) {
    robust_lock(m);
    return true;
  };
  auto claim_on_keeper = [&] {
    uint32_t slot = Registry::kBusy;  // (kept when the keeper could not start: said why)
    keeper_run([&] { slot = reg->claim(arena->fd(), arena->inode(), arena->size(), lock_here, may_take); });
    return slot;
  };
  uint32_t slot;
  // (A registry removed while we attached, as its namespace looked idle to
  // another's first process: this namespace's registry is opened anew.)
  while ((slot = claim_on_keeper()) == Registry::kRemoved) {
    delete reg;
    if (!(reg = Registry::open_or_create())) return nullptr;
  }
  if (slot == Registry::kBusy) {  // (said why)
    errno = EAGAIN;
    return nullptr;
  }
  if (refused_by_service) {
    errno = EAGAIN;
    return nullptr;
  }
  if (!slot && refused) {
    SV_ERROR("no registry slot is free on this host: the host service leased %u of ours to other users", refused);
    errno = EAGAIN;
    return nullptr;
  }
  if (!slot && service) {
    SV_ERROR("registry %s: all %u slots the host service can lease are in use", reg->path().c_str(), kHomeSlots - 1);
    errno = EAGAIN;
    return nullptr;
  }
  if (!slot) {
    SV_ERROR("registry %s is full: %u live processes", reg->path().c_str(), kMaxProcs - 1);
    errno = EAGAIN;
    return nullptr;
  }
  uint32_t inc = reg->proc(slot).incarnation.load();
  arena->lease_names_from(reg->header(), slot, service != nullptr);
  // What processes killed before their exit handlers ran left, where no
  // registry slot of theirs says so (Registry::claim removes the others'):
  // those of a namespace that is gone, by the next namespace's first process.
  if (reg->made_here()) remove_files_of_dead_processes();
  arena->header()->slot = slot;
  arena->header()->incarnation = inc;
  SV_DEBUG("attached to %s as slot %u%s", reg->path().c_str(), slot, service ? ", leased from the host service" : "");
  Host* const h = new Host(reg, arena, slot, inc, std::move(service));
  g_joined_registry.store(reg->header(), std::memory_order_relaxed);
  g_host.store(h, std::memory_order_release);
  return h;
}

HostService* Host::adopt_service(std::unique_ptr<HostService> s) {
  HostService* expected = nullptr;
  HostService* const mine = s.get();
  if (service_.compare_exchange_strong(expected, mine, std::memory_order_acq_rel)) return s.release();
  return expected;  // (one came already)
}

uint32_t Host::fork_generation() { return g_fork_generation.load(std::memory_order_acquire); }

void Host::allow_cross_memory_attach() {
  if (cma_allowed_) return;
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);  // EINVAL without Yama: harmless
  cma_allowed_ = true;
}

}  // namespace sv::shm
