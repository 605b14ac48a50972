// This process's attachment to the host: the registry, our slot in it, our
// arena, the overlay map of registered memory and the table of mapped peers.
// Created on first use (the first ibv_open_device) and kept for the life of
// the process; a fork child starts over with a fresh attachment.
#pragma once

#include <cstdint>

#include <atomic>
#include <memory>

#include "shm/arena.h"
#include "shm/host_service.h"
#include "shm/overlay.h"
#include "shm/peers.h"
#include "shm/registry.h"
#include "util/private_heap.h"

namespace sv::shm {

// The registry of the host this process joined (nullptr before Host::get
// first succeeds), for code with no Host at hand.
inline std::atomic<const RegistryHeader*> g_joined_registry{nullptr};

// The slot that holds QPN `qpn` on the host this process joined: the home
// rule (shm/layout.h) before it joined.
inline uint32_t qpn_owner(uint32_t qpn) {
  const RegistryHeader* r = g_joined_registry.load(std::memory_order_relaxed);
  return r ? block_owner(r->qpn_blocks, qpn_block(qpn)) : home_slot_of_qpn(qpn);
}

inline uint32_t srqn_owner(uint32_t srqn) {
  const RegistryHeader* r = g_joined_registry.load(std::memory_order_relaxed);
  return r ? block_owner(r->srqn_blocks, qpn_block(srqn)) : home_slot_of_qpn(srqn);
}

class Host : public PrivateHeapObject {
 public:
  // nullptr (errno set) if the host cannot be joined.
  static Host* get();
  // Bumped in every fork() child: objects made before it belong to the
  // parent (Context::from reopens an inherited context in the child).
  static uint32_t fork_generation();

  Registry& registry() { return *registry_; }
  Arena& arena() { return *arena_; }
  OverlayMap& overlays() { return overlays_; }
  PeerTable& peers() { return peers_; }
  uint32_t slot() const { return slot_; }
  uint32_t incarnation() const { return incarnation_; }
  // The slot of the process that holds a QPN, an MR key, an SRQ number
  // (shm/layout.h: one load from the registry's table of blocks).
  uint32_t qpn_owner(uint32_t qpn) const { return block_owner(names_->qpn_blocks, qpn_block(qpn)); }
  uint32_t key_owner(uint32_t key) const { return block_owner(names_->key_blocks, key_block(key)); }
  uint32_t srqn_owner(uint32_t srqn) const { return block_owner(names_->srqn_blocks, qpn_block(srqn)); }
  // The host service (shm/host_service.h), when one runs: it holds our
  // slot's lease and brings our RoCEv2 datagrams. nullptr without one.
  HostService* service() const { return service_.load(std::memory_order_acquire); }
  // A process that started without a service, once one came (the network
  // thread hands it the port then): this one from now on. Kept for the
  // process's life, as the first.
  HostService* adopt_service(std::unique_ptr<HostService> s);

  // Lets same-user peers use process_vm_readv/writev on us (Yama mode 1
  // otherwise allows it only to our ancestors). Called when an MR needs it.
  void allow_cross_memory_attach();

 private:
  Host(Registry* r, Arena* a, uint32_t slot, uint32_t incarnation, std::unique_ptr<HostService> service);

  Registry* registry_;
  const RegistryHeader* names_;  // the registry's tables of blocks
  Arena* arena_;
  uint32_t slot_;
  uint32_t incarnation_;
  std::atomic<HostService*> service_;  // (owned; never freed: the transport holds it)
  OverlayMap overlays_;
  PeerTable peers_;
  bool cma_allowed_ = false;
};

}  // namespace sv::shm
