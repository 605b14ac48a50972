#include "shm/registry.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>

#include "shm/idle_namespaces.h"
#include "shm/robust_mutex.h"
#include "shm/runtime_dir.h"
#include "util/clock.h"
#include "util/knobs.h"
#include "util/log.h"
#include "util/runtime_dir_rules.h"
#include "util/small_file.h"
#include "util/unix_socket_address.h"

namespace sv::shm {

uint64_t host_node_guid() {
  // (Read once: opening the device asks three times. The machine's id
  // does not change under a running process.)
  static const uint64_t guid = [] {
    std::string id = read_small_file("/etc/machine-id").value_or("");
    id.erase(std::find_if(id.begin(), id.end(), [](char c) { return c == '\n' || c == ' ' || c == '\t'; }), id.end());
    if (id.empty()) {
      char host[256] = {};
      gethostname(host, sizeof host - 1);
      id = host;
    }
    // FNV-1a: stable across builds and processes (std::hash need not be).
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : id) h = (h ^ c) * 0x100000001b3ull;
    // Shape it like an EUI-64 derived from a locally administered MAC.
    return (h & ~0x0100000000000000ull) | 0x0200000000000000ull;
  }();
  return guid;
}

Registry* Registry::open_or_create() {
  const Knobs& k = knobs();
  // The layout version is part of the name: processes of builds with
  // different layouts cannot talk, and must not overwrite each other's
  // registry while they run. So is the network namespace: it is the host
  // (shared memory never reaches across namespaces), and each has its own
  // slots, so namespace hosts on one machine have a process limit each.
  // A domain named on purpose is shared by name in /dev/shm (any user who
  // names it may join, as SOFTVERBS_DOMAIN_MODE allows); the default one
  // is this user's, in a directory no one else can plant files in.
  const bool named = k.domain_in_environment;
  std::string path;
  if (named) {
    path = named_domain_registry(k.domain);
  } else {
    const std::string& dir = runtime_dir();
    if (dir.empty()) return nullptr;  // said why
    path = dir + "/registry" + registry_suffix();
  }
  int fd = -1;
  struct stat st;
  for (;;) {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, k.domain_mode);
    if (fd < 0) {
      SV_ERROR("cannot open registry %s: %s", path.c_str(), strerror(errno));
      return nullptr;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      errno = EACCES;
      return nullptr;
    }
    // Ours, unless the user chose the domain explicitly (opting in to sharing).
    if (st.st_uid != geteuid() && !named) {
      SV_ERROR("registry %s belongs to uid %u, not us; set SOFTVERBS_DOMAIN to share", path.c_str(),
               st.st_uid);
      ::close(fd);
      errno = EACCES;
      return nullptr;
    }
    flock(fd, LOCK_EX);
    // Still the namespace's registry: a process that found the namespace
    // gone may have removed it while we waited for the lock
    // (shm/idle_namespaces.h). Then a new one is made.
    if (fstat(fd, &st) == 0 && st.st_nlink > 0) break;
    flock(fd, LOCK_UN);
    ::close(fd);
  }
  // (The size is read under the lock: read before it, it may be that of
  // the empty file another process has initialised since, and taking it for
  // new would wipe the slots that process and others have claimed meanwhile:
  // processes starting together in a new domain shared slots.)
  bool fresh = false;
  if (static_cast<size_t>(st.st_size) < sizeof(RegistryHeader)) {
    // Its pages are allocated now, not at first touch: on a full /dev/shm
    // that touch would be a SIGBUS (ftruncate only sets the size); here it
    // is an error the verb returns, and the next attempt starts over.
    // (Emptied first: the pages are then zeros, and a new registry is not
    // written over whole, 1.3 MiB each of its first process touched.)
    int err = ftruncate(fd, 0) != 0 ? errno : 0;
    if (!err) err = posix_fallocate(fd, 0, sizeof(RegistryHeader));
    if (err) {
      SV_ERROR("cannot allocate registry %s: %s%s", path.c_str(), strerror(err),
               err == ENOSPC ? " (/dev/shm is full)" : "");
      flock(fd, LOCK_UN);
      ::close(fd);
      errno = err;
      return nullptr;
    }
    fresh = true;
  }
  void* p = mmap(nullptr, sizeof(RegistryHeader), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    flock(fd, LOCK_UN);
    ::close(fd);
    return nullptr;
  }
  madvise(p, sizeof(RegistryHeader), MADV_DONTFORK);
  auto* hdr = static_cast<RegistryHeader*>(p);
  if (fresh || hdr->magic != kRegistryMagic || hdr->version != kLayoutVersion ||
      hdr->header_size != sizeof(RegistryHeader)) {
    // New, or not a registry at all (a truncated or foreign file): start over.
    if (!fresh) {
      SV_WARN("re-initialising registry %s (it was not a valid registry)", path.c_str());
      std::memset(p, 0, sizeof(RegistryHeader));
    }
    hdr->version = kLayoutVersion;
    hdr->header_size = sizeof(RegistryHeader);
    hdr->node_guid = host_node_guid();
    robust_mutex_init(&hdr->claims);
    robust_mutex_init(&hdr->mcast.lock);
    for (pthread_mutex_t& m : hdr->atomic_locks) robust_mutex_init(&m);
    robust_mutex_init(&hdr->xrcds.lock);
    std::atomic_thread_fence(std::memory_order_release);
    hdr->magic = kRegistryMagic;
  }
  flock(fd, LOCK_UN);
  // The first process of a namespace removes what namespaces that are gone
  // left (once per namespace: a machine that runs namespace tests makes
  // hundreds). Not in a domain named on purpose: its files are shared.
  if (fresh && !named) remove_state_of_idle_namespaces(runtime_dir());
  return new Registry(fd, hdr, path, fresh);
}

Registry::~Registry() {
  munmap(hdr_, sizeof(RegistryHeader));
  ::close(fd_);
}

// Reads a word of every page of the slots in use (and the next one's),
// before the claims lock: the claim reads those under it, and the first
// touch of a page in a new process costs ~16 us on a VM with shadow page
// tables (the hypervisor maps it), 2-11 ms a claim for 128 pages. Every
// process attaching waits for the lock, so a ring of 4096 starting
// together waited minutes; touched here, in parallel, a claim holds the
// lock ~0.4 ms.
void Registry::touch_slots() const {
  const volatile char* p = reinterpret_cast<const volatile char*>(hdr_->procs);
  const size_t end = std::min<size_t>(hdr_->slots_in_use() + 1, kMaxProcs) * sizeof(ProcSlot);
  for (size_t off = 0; off < end; off += 4096) (void)p[off];
}

void Registry::note_claimed(uint32_t slot) {
  if (slot >= hdr_->slots_used.load(std::memory_order_relaxed))
    hdr_->slots_used.store(slot + 1, std::memory_order_release);
}

bool Registry::lock_claims() {
  const unsigned wait_s = knobs().attach_wait_s;
  // (timedlock, on the wall clock: ThreadSanitizer's runtime in Debian 12
  // knows no pthread_mutex_clocklock, and took our unlock for a stray one.)
  timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += wait_s;
  int rc;
  while ((rc = pthread_mutex_timedlock(&hdr_->claims, &until)) == EINTR) {
  }
  if (rc == EOWNERDEAD) {  // a claimer died in its claim: what it did is undone or complete (claim's last store)
    pthread_mutex_consistent(&hdr_->claims);
    return true;
  }
  if (rc == 0) return true;
  // (glibc keeps the holder's thread id in the futex word, the mutex's first int.)
  uint32_t holder;
  std::memcpy(&holder, &hdr_->claims, sizeof holder);
  SV_ERROR("registry %s: another process (thread %u) has been claiming a slot for %u s: it is stopped or hung; "
           "this one gives up (SOFTVERBS_ATTACH_WAIT_S)",
           path_.c_str(), holder & 0x3fffffffu, wait_s);
  errno = EAGAIN;
  return false;
}

bool Registry::still_linked() const {
  struct stat st;
  return fstat(fd_, &st) == 0 && st.st_nlink > 0;
}
void Registry::unlock_claims() { pthread_mutex_unlock(&hdr_->claims); }

// The slots a new process may take, best first (Registry::first_claimable):
// those with home blocks of names (below kHomeSlots) before the rest, and
// in each, those free before those whose owner died (crashed, or exited).
// Peers send RoCEv2 to a
// process in a slot from kHomeSlots up by their shared source port (lane 0,
// RoceSocket::lane_port), as to every other such process of its host: one
// flow then carries packets for two processes, and one forwards the other's.
// (A namespace's registry outlives it, and a new namespace given the same
// inode found hundreds of dead slots: its MPI ranks got slots past 400, and
// one forwarded the other's packets: mw_mpi_hosts_* failed in CI so.)
void Registry::sort_claimed_slots(uint32_t used, std::vector<uint32_t>* free, std::vector<uint32_t>* dead) {
  for (uint32_t i = 1; i < used; ++i) {
    ProcSlot& s = hdr_->procs[i];
    if (s.state.load(std::memory_order_acquire) == kProcFree)
      free->push_back(i);
    else if (!proc_alive(s))
      dead->push_back(i);
  }
}

// The blocks of names (shm/name_pool.h) whose holder is gone go back to
// the host: a process keeps its blocks for its whole life, and the
// registry's claims lock, held here, keeps a dead slot dead meanwhile (so
// a block freed here cannot be one its slot's next process leased).
//
// A process killed before its exit handlers ran also left its files in the
// runtime directory (shm/runtime_dir.h): they go here too, once per dead
// slot (its pid is then cleared).
void Registry::tidy_dead_slots() {
  std::vector<bool> live(kMaxProcs, false);
  bool dead_held_names = false;
  const uint32_t used = hdr_->slots_in_use();  // (a slot never claimed holds no names and left no files)
  for (uint32_t i = 1; i < used; ++i) {
    ProcSlot& s = hdr_->procs[i];
    live[i] = s.state.load(std::memory_order_acquire) == kProcLive && proc_alive(s);
    if (live[i]) continue;
    // (A pid a live process has again stays, for a later claim to try.)
    if (s.pid > 0 && remove_files_of_gone_process(s.pid)) s.pid = 0;
    if (s.name_blocks.exchange(0, std::memory_order_acq_rel)) dead_held_names = true;
  }
  if (!dead_held_names) return;  // (the tables hold 196608 entries: a search per claim showed)
  for (std::atomic<uint32_t>* table : {hdr_->qpn_blocks, hdr_->key_blocks, hdr_->srqn_blocks})
    for (uint32_t b = 0; b < kNameBlocks; ++b)
      if (uint32_t holder = table[b].load(std::memory_order_relaxed); holder && (holder >= kMaxProcs || !live[holder]))
        table[b].store(0, std::memory_order_relaxed);
  forget_memberships_of_freed_names();
}

// A process that died (or was killed) with QPs attached to multicast groups
// left their QPNs there. The next holder of their block makes QPs with the
// same numbers: one of them would be "already attached", and its detach
// would then leave its count below zero (ibv_destroy_qp EBUSY: perftest's
// "Couldn't destroy all SEND resources" after mckey runs were killed).
// Memberships of QPNs whose block no live process holds are dropped.
void Registry::forget_memberships_of_freed_names() {
  RobustLock lock(&hdr_->mcast.lock);
  for (McastGroup& g : hdr_->mcast.groups)
    for (auto& m : g.members)
      if (uint32_t qpn = m.load(std::memory_order_relaxed);
          qpn && !hdr_->qpn_blocks[qpn_block(qpn)].load(std::memory_order_relaxed))
        m.store(0, std::memory_order_release);
}

void Registry::fill_slot(uint32_t slot, int arena_fd, uint64_t arena_ino, uint64_t arena_size) {
  ProcSlot& s = hdr_->procs[slot];
  s.state.store(kProcFree, std::memory_order_relaxed);
  // Re-initialising the mutex is safe: its previous holder is dead or absent,
  // and we hold the registry's claims lock, so no other process claims this slot.
  robust_mutex_init(&s.alive);
  s.incarnation.fetch_add(1, std::memory_order_relaxed);
  s.pid = getpid();
  s.arena_fd = arena_fd;
  s.arena_ino = arena_ino;
  s.arena_size = arena_size;
  s.started_ns = realtime_ns();
  s.netns_ino = own_netns_inode();
}

}  // namespace sv::shm
