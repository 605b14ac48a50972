// The intra-host transport's per-connection entries (shm_connections.h):
// one per local QP index, opened empty, forgotten on reset, never shared.
#include "transport/shm_connections.h"

#include <gtest/gtest.h>

namespace sv {
namespace {

// A QP number of registry slot `slot`, QP table index `index`.
constexpr uint32_t qpn(uint32_t slot, uint32_t index) { return (slot << 16) | index; }

TEST(ShmConnections, AQpNeverReadyToSendHasNone) {
  ShmConnections c;
  EXPECT_EQ(c.find(qpn(1, 7)), nullptr);
  c.forget(qpn(1, 7));  // (no entry: nothing to do)
  EXPECT_EQ(c.find(qpn(1, 7)), nullptr);
}

TEST(ShmConnections, OpenGivesAnEmptyEntryPerQpIndex) {
  ShmConnections c;
  c.open(qpn(1, 0));
  c.open(qpn(1, 255));
  c.open(qpn(1, 256));  // the next chunk
  c.open(qpn(1, 0xffff));
  ShmConnection* a = c.find(qpn(1, 0));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->target, nullptr);
  EXPECT_EQ(a->ahead.count, 0u);
  EXPECT_NE(c.find(qpn(1, 255)), a);
  EXPECT_NE(c.find(qpn(1, 256)), nullptr);
  EXPECT_NE(c.find(qpn(1, 0xffff)), nullptr);
  EXPECT_EQ(c.find(qpn(1, 1)), nullptr);  // a neighbour that was not opened
}

TEST(ShmConnections, OpeningAgainOrForgettingEmptiesTheSameEntry) {
  ShmConnections c;
  c.open(qpn(1, 3));
  ShmConnection* e = c.find(qpn(1, 3));
  auto* fake_target = reinterpret_cast<shm::QpShared*>(uintptr_t{0x1000});
  e->target = fake_target;
  e->ahead.count = 2;
  c.open(qpn(1, 3));  // ready to send again (new attributes): starts over
  EXPECT_EQ(c.find(qpn(1, 3)), e);  // the same storage: a stale pointer never dangles
  EXPECT_EQ(e->target, nullptr);
  EXPECT_EQ(e->ahead.count, 0u);
  e->target = fake_target;
  c.forget(qpn(1, 3));  // reset or destroyed
  EXPECT_EQ(e->target, nullptr);
}

}  // namespace
}  // namespace sv
