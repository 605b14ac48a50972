// Names leased in blocks (shm/name_pool.h): where a process's QPNs, keys
// and SRQ numbers come from, so that 4096 processes share the host's 2^24
// names and one process can still have 2^16 of each.
#include "shm/name_pool.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>

#include "shm/layout.h"

namespace sv::shm {
namespace {

struct Blocks {
  std::unique_ptr<std::atomic<uint32_t>[]> table{new std::atomic<uint32_t>[kNameBlocks]()};
  uint32_t owner(uint32_t name) const { return block_owner(table.get(), name >> 8); }
};

TEST(NamePool, AHomeSlotsNamesAreSlotShiftedSixteen) {
  Blocks b;
  NamePool p(0, kMulticastQpnBlock);
  p.lease_from(b.table.get(), 5, false);
  const int64_t i = p.take();
  ASSERT_EQ(i, 0);
  EXPECT_EQ(p.name_of(0), 0x50000u) << "the host service steers by this byte";
  EXPECT_EQ(b.table[0x500].load(), 5u);
  EXPECT_EQ(b.owner(p.name_of(0)), 5u);
}

TEST(NamePool, ASlotBeyondTheHomesLeasesElsewhereAndIsFoundByItsBlock) {
  Blocks b;
  NamePool p(0, kMulticastQpnBlock);
  p.lease_from(b.table.get(), 4000, false);
  const int64_t i = p.take();
  ASSERT_GE(i, 0);
  EXPECT_EQ(static_cast<uint32_t>(i) >> 8, 4000u % 256) << "its first column is its slot's";
  const uint32_t name = p.name_of(static_cast<uint32_t>(i));
  EXPECT_EQ(name & 0xffff, static_cast<uint32_t>(i)) << "the owner's index is the name's low 16 bits";
  EXPECT_EQ(b.owner(name), 4000u);
}

TEST(NamePool, IndicesGoRoundRobinOverEightColumnsBeforeOneIsReused) {
  Blocks b;
  NamePool p(0, kMulticastQpnBlock);
  p.lease_from(b.table.get(), 9, false);
  std::set<uint32_t> names;
  for (uint32_t n = 0; n < NamePool::kRoundRobinColumns * kBlockNames; ++n) {
    const int64_t i = p.take();
    ASSERT_GE(i, 0);
    names.insert(p.name_of(static_cast<uint32_t>(i)));
    p.give_back(static_cast<uint32_t>(i));
  }
  EXPECT_EQ(names.size(), NamePool::kRoundRobinColumns * kBlockNames) << "a freed number came back early";
  EXPECT_EQ(p.columns_leased(), NamePool::kRoundRobinColumns);
  const int64_t again = p.take();
  EXPECT_EQ(again, 0) << "after the eighth column it wraps";
  EXPECT_EQ(p.columns_leased(), NamePool::kRoundRobinColumns) << "and leases no more while it need not";
}

TEST(NamePool, OneProcessCanHoldAllOfItsTableWhileOthersHoldTheirs) {
  Blocks b;
  NamePool big(0, kMulticastQpnBlock), small(0, kMulticastQpnBlock);
  big.lease_from(b.table.get(), 7, false);
  small.lease_from(b.table.get(), 300, false);
  ASSERT_GE(small.take(), 0);
  std::set<uint32_t> names;
  for (uint32_t n = 0; n < kMaxQps; ++n) {
    const int64_t i = big.take();
    ASSERT_GE(i, 0) << n;
    names.insert(big.name_of(static_cast<uint32_t>(i)));
  }
  EXPECT_EQ(names.size(), kMaxQps);
  EXPECT_EQ(big.take(), -1);
  EXPECT_FALSE(big.names_ran_out()) << "its table is full, not the host's names";
  for (uint32_t name : names) {
    ASSERT_EQ(b.owner(name), 7u) << std::hex << name;
    ASSERT_NE(name, 0xffffffu);
    ASSERT_GT(name, 1u);
  }
}

TEST(NamePool, TakenHomeBlocksAreLeftToTheirHolderAndAServiceProcessTakesOnlyHomes) {
  Blocks b;
  b.table[0x0700].store(3000);  // slot 7's home of column 0, held by another
  NamePool p(0, kMulticastQpnBlock);
  p.lease_from(b.table.get(), 7, false);
  const int64_t i = p.take();
  ASSERT_EQ(i, 0);
  EXPECT_NE(p.name_of(0) >> 8, 0x0700u);
  EXPECT_EQ(b.table[0x0700].load(), 3000u);
  NamePool served(0, kMulticastQpnBlock);
  served.lease_from(b.table.get(), 7, true);
  const int64_t s = served.take();
  ASSERT_EQ(s, 256) << "the next column's home block, not another slot's";
  EXPECT_EQ(served.name_of(256), 0x070100u) << "the host service steers by the QPN's slot byte";
  for (uint32_t col = 1; col < 256; ++col) b.table[0x0700 | col].store(3000);
  NamePool served_full(0, kMulticastQpnBlock);
  served_full.lease_from(b.table.get(), 7, true);
  EXPECT_EQ(served_full.take(), -1) << "no home block left, and no other will do";
  EXPECT_TRUE(served_full.names_ran_out());
}

TEST(NamePool, NeverLeasesTheMulticastBlockForQpnsAndSaysWhenTheHostsNamesRunOut) {
  Blocks b;
  for (uint32_t blk = 1; blk < kNameBlocks; ++blk)
    if (blk != kMulticastQpnBlock) b.table[blk].store(4095);
  NamePool qpns(0, kMulticastQpnBlock), keys(1, 0);
  qpns.lease_from(b.table.get(), 255 + 256, false);
  keys.lease_from(b.table.get(), 255 + 256, false);
  EXPECT_EQ(qpns.take(), -1);
  EXPECT_TRUE(qpns.names_ran_out());
  const int64_t k = keys.take();
  ASSERT_GE(k, 0) << "keys have no multicast number";
  EXPECT_EQ(keys.block_of(static_cast<uint32_t>(k)), kMulticastQpnBlock);
}

TEST(NamePool, IndexZeroIsNotHandedOutWhenFirstIsOne) {
  Blocks b;
  NamePool p(1, 0);
  p.lease_from(b.table.get(), 2, false);
  EXPECT_EQ(p.take(), 1);
}

}  // namespace
}  // namespace sv::shm
