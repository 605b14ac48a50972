#include "shm/name_pool.h"

#include "shm/layout.h"

namespace sv::shm {

NamePool::NamePool(uint32_t first, uint32_t reserved_block)
    : first_(first), reserved_block_(reserved_block), used_(kColumns * kBlockNames, false) {}

void NamePool::lease_from(std::atomic<uint32_t>* blocks, uint32_t slot, bool home_only,
                          std::atomic<uint32_t>* leased) {
  blocks_ = blocks;
  leased_ = leased;
  slot_ = slot;
  home_only_ = home_only && slot < kHomeSlots;
  next_column_ = slot < kHomeSlots ? 0 : slot % kColumns;
}

// Block hi << 8 | column. A home slot tries its own first. The others try
// hi 0 (the home of slot 0, which no process has), then the homes of the
// highest slots, which are taken last (Registry::first_claimable) and whose
// processes seldom need more than their first column.
bool NamePool::lease_column(uint32_t column) {
  if (!blocks_) return false;
  auto try_block = [&](uint32_t hi) {
    const uint32_t block = hi << 8 | column;
    if (block == 0 || block == reserved_block_) return false;
    // (Counted first: a block in the table is never one tidy_dead_slots
    // could skip.)
    if (leased_) leased_->fetch_add(1, std::memory_order_acq_rel);
    uint32_t expected = 0;
    if (!blocks_[block].compare_exchange_strong(expected, slot_, std::memory_order_acq_rel)) {
      if (leased_) leased_->fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    block_of_column_[column] = block;
    return true;
  };
  if (slot_ < kHomeSlots && try_block(slot_)) return true;
  if (home_only_) return false;
  if (try_block(0)) return true;
  for (uint32_t hi = kHomeSlots - 1; hi > 0; --hi)
    if (hi != slot_ && try_block(hi)) return true;
  return false;
}

bool NamePool::lease_next_column() {
  for (uint32_t n = 0; n < kColumns; ++n) {
    const uint32_t c = (next_column_ + n) % kColumns;
    if (block_of_column_[c] || !lease_column(c)) continue;
    next_column_ = (c + 1) % kColumns;
    order_[columns_++] = static_cast<uint8_t>(c);
    return true;
  }
  return false;
}

int64_t NamePool::take() {
  ran_out_ = false;
  for (;;) {
    if (columns_ == 0 && !lease_next_column()) return ran_out_ = true, -1;
    for (uint32_t visited = 0, total = columns_ * kBlockNames; visited < total; ++visited) {
      const uint32_t i = uint32_t{order_[cursor_]} << 8 | cursor_off_;
      if (++cursor_off_ == kBlockNames) {
        cursor_off_ = 0;
        // At the end of the leased columns: lease another rather than reuse
        // a number soon, up to kRoundRobinColumns of them.
        if (++cursor_ == columns_ && !(columns_ < kRoundRobinColumns && lease_next_column())) cursor_ = 0;
      }
      if (i >= first_ && !used_[i]) {
        used_[i] = true;
        ++count_;
        return i;
      }
    }
    // Every index of the leased columns is in use.
    if (columns_ == kColumns) return -1;
    if (!lease_next_column()) return ran_out_ = true, -1;
    cursor_ = columns_ - 1;
    cursor_off_ = 0;
  }
}

void NamePool::give_back(uint32_t index) {
  if (index < used_.size() && used_[index]) {
    used_[index] = false;
    --count_;
  }
}

}  // namespace sv::shm
