// The host registry: /dev/shm/softverbs-<domain>.v<layout>, one per user by default
// (mode 0600), holding one ProcSlot per attached process. It is the only
// shared file with a name; everything else is reached through it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "shm/layout.h"
#include "util/private_heap.h"

namespace sv::shm {

class Registry : public PrivateHeapObject {
 public:
  // Opens the registry of the configured domain, creating it when absent.
  // Returns nullptr (errno set) on failure.
  static Registry* open_or_create();

  RegistryHeader* header() const { return hdr_; }
  ProcSlot& proc(uint32_t slot) const { return hdr_->procs[slot]; }

  // Finds a free or dead slot and prepares it for this process, after
  // tidying what processes that are gone left: their name blocks, and their
  // files in the runtime directory. Runs under
  // the registry's claims lock (RegistryHeader::claims) so that two
  // processes never claim the same slot: keep it short, every process that
  // attaches waits for it. `lock_alive` is called with the slot's liveness
  // mutex and must return true once some long-lived thread of ours holds it
  // (Host::get runs the claim on that thread), or false when none can: the
  // slot is then left free and kBusy returned with errno EAGAIN, since a
  // slot marked live whose mutex nobody holds looks dead, and the next
  // claim would take it from under this process.
  // `may_take(slot)` is asked last about a slot found free here, and may
  // refuse it (the host service leased it to another user): then the next
  // one is tried. Returns the slot number, or 0 if all slots are in use by
  // live processes (or refused), or kRemoved when the file is no longer
  // the namespace's registry (removed meanwhile as idle: shm/idle_namespaces.h),
  // and the caller opens it anew, or kBusy when another process held the
  // claims lock for SOFTVERBS_ATTACH_WAIT_S (said here) or lock_alive failed.
  static constexpr uint32_t kRemoved = UINT32_MAX;
  static constexpr uint32_t kBusy = UINT32_MAX - 1;
  template <typename LockAlive, typename MayTake>
  uint32_t claim(int arena_fd, uint64_t arena_ino, uint64_t arena_size, LockAlive&& lock_alive, MayTake&& may_take);

  const std::string& path() const { return path_; }
  // This process made the file (the first of its namespace).
  bool made_here() const { return made_here_; }

  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

 private:
  Registry(int fd, RegistryHeader* hdr, std::string path, bool made_here)
      : fd_(fd), hdr_(hdr), path_(std::move(path)), made_here_(made_here) {}
  template <typename MayTake>
  uint32_t first_claimable(MayTake&& may_take);
  // The slots below `used` that are free, and those whose owner is dead.
  void sort_claimed_slots(uint32_t used, std::vector<uint32_t>* free, std::vector<uint32_t>* dead);
  void tidy_dead_slots();
  void forget_memberships_of_freed_names();
  void fill_slot(uint32_t slot, int arena_fd, uint64_t arena_ino, uint64_t arena_size);
  void touch_slots() const;
  void note_claimed(uint32_t slot);
  bool lock_claims();
  void unlock_claims();
  bool still_linked() const;

  int fd_;
  RegistryHeader* hdr_;
  std::string path_;
  bool made_here_;
};

template <typename LockAlive, typename MayTake>
uint32_t Registry::claim(int arena_fd, uint64_t arena_ino, uint64_t arena_size, LockAlive&& lock_alive,
                         MayTake&& may_take) {
  touch_slots();
  if (!lock_claims()) return kBusy;
  if (!still_linked()) {
    unlock_claims();
    return kRemoved;
  }
  tidy_dead_slots();
  const uint32_t slot = first_claimable(may_take);
  if (slot) {
    fill_slot(slot, arena_fd, arena_ino, arena_size);
    if (!lock_alive(&hdr_->procs[slot].alive)) {
      unlock_claims();
      errno = EAGAIN;
      return kBusy;
    }
    hdr_->procs[slot].state.store(kProcLive, std::memory_order_release);
    note_claimed(slot);
  }
  unlock_claims();
  return slot;
}

// The first slot `may_take` accepts, in the order of claimable slots
// (registry.cpp, above sort_claimed_slots). Slots from RegistryHeader::slots_in_use() on
// were never claimed: they are visited as a range, not listed, so a claim
// costs no list of ~4000 slots.
template <typename MayTake>
uint32_t Registry::first_claimable(MayTake&& may_take) {
  const uint32_t used = hdr_->slots_in_use();
  std::vector<uint32_t> free, dead;  // below `used`
  sort_claimed_slots(used, &free, &dead);
  for (const bool home : {true, false}) {
    auto in_band = [home](uint32_t s) { return (s < kHomeSlots) == home; };
    for (uint32_t s : free)
      if (in_band(s) && may_take(s)) return s;
    const uint32_t never_from = home ? used : std::max(used, kHomeSlots);
    const uint32_t never_to = home ? kHomeSlots : kMaxProcs;
    for (uint32_t s = never_from; s < never_to; ++s)
      if (may_take(s)) return s;
    for (uint32_t s : dead)
      if (in_band(s) && may_take(s)) return s;
  }
  return 0;
}

// Host-stable 64-bit node GUID (from /etc/machine-id, else the hostname).
uint64_t host_node_guid();

}  // namespace sv::shm
