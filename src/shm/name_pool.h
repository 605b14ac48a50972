// Hands out one process's table indices of one kind (QPs, MRs and windows,
// SRQs) and the host-wide names peers know them by (shm/layout.h: 24-bit
// names in blocks of 256). A block is leased from the registry's table of
// that kind the first time an index of its column is handed out, and kept
// for the life of the process: its slot's next claimer frees it
// (Registry::claim). Indices go round-robin over the leased columns, and
// the first kRoundRobinColumns columns are leased before an index is reused,
// so a freed number is reused late (a peer holding a stale one then finds
// nothing) without a process that only ever has a few objects holding
// blocks that 4096 processes share.
#pragma once

#include <atomic>
#include <cstdint>

#include "util/private_heap.h"

namespace sv::shm {

class NamePool {
 public:
  // Indices below `first` are never handed out (index 0 of MRs: key 0 means
  // free). `reserved_block` is never leased (kMulticastQpnBlock for QPNs).
  NamePool(uint32_t first, uint32_t reserved_block);

  // At attach: the registry's table of this kind, and our slot. A slot
  // below kHomeSlots starts at column 0 and prefers its home blocks; any
  // other starts at the column its slot number gives, so the first blocks
  // of 4096 processes spread over all 256 columns. `home_only`: no other
  // blocks (a process of the host service, which steers by home slot).
  // `leased` counts the blocks leased (ProcSlot::name_blocks; may be null).
  void lease_from(std::atomic<uint32_t>* blocks, uint32_t slot, bool home_only,
                  std::atomic<uint32_t>* leased = nullptr);

  // A free index, its block leased; -1 when every index is in use or no
  // block is free for a new column (the host's names ran out).
  int64_t take();
  void give_back(uint32_t index);

  // The name of an index take() handed out (24 bits).
  uint32_t name_of(uint32_t index) const { return block_of_column_[index >> 8] << 8 | (index & 0xff); }
  uint32_t block_of(uint32_t index) const { return block_of_column_[index >> 8]; }

  uint32_t count() const { return count_; }
  uint32_t columns_leased() const { return columns_; }
  // True after take() failed for want of a free block (the host's names ran out).
  bool names_ran_out() const { return ran_out_; }

  static constexpr uint32_t kColumns = 256;
  static constexpr uint32_t kRoundRobinColumns = 8;

 private:
  bool lease_next_column();
  bool lease_column(uint32_t column);
  int64_t take_in(uint32_t column, uint32_t from);

  uint32_t first_;
  uint32_t reserved_block_;
  std::atomic<uint32_t>* blocks_ = nullptr;
  std::atomic<uint32_t>* leased_ = nullptr;
  uint32_t slot_ = 0;
  bool home_only_ = false;
  uint32_t block_of_column_[kColumns] = {};  // 0: not leased (block 0 is no one's)
  uint8_t order_[kColumns] = {};             // leased columns, in lease order
  uint32_t columns_ = 0;
  uint32_t next_column_ = 0;  // where the next lease begins to look
  uint32_t cursor_ = 0;       // round-robin: position in order_ ...
  uint32_t cursor_off_ = 0;   // ... and offset in that column
  uint32_t count_ = 0;
  bool ran_out_ = false;
  PrivateVector<bool> used_;
};

}  // namespace sv::shm
