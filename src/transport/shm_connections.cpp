#include "transport/shm_connections.h"

namespace sv {

ShmConnections::~ShmConnections() {
  for (auto& slot : chunks_) {
    Chunk* c = slot.load(std::memory_order_relaxed);
    if (!c) continue;
    for (auto& e : c->entries) delete e.load(std::memory_order_relaxed);
    delete c;
  }
}

void ShmConnections::open(uint32_t qpn) {
  if (ShmConnection* c = find(qpn)) {
    c->forget();
    return;
  }
  std::lock_guard g(grow_mu_);
  const uint32_t i = shm::qpn_index(qpn);
  Chunk* chunk = chunks_[i / kChunk].load(std::memory_order_relaxed);
  if (!chunk) {
    chunk = new Chunk;
    chunks_[i / kChunk].store(chunk, std::memory_order_release);
  }
  if (!chunk->entries[i % kChunk].load(std::memory_order_relaxed))
    chunk->entries[i % kChunk].store(new ShmConnection, std::memory_order_release);
}

}  // namespace sv
