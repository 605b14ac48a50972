// DeferSends (core/deferred_sends.h): what a transport leaves for the end
// of a scope is sent once, at the outermost scope's end, and only one
// transport's sends wait there.
#include "core/deferred_sends.h"

#include <gtest/gtest.h>

namespace sv {
namespace {

int g_sent[2];
void count_send(void* transport) { ++*static_cast<int*>(transport); }

TEST(DeferSends, OutsideAScopeNothingIsDeferred) {
  EXPECT_FALSE(defer_sends(&count_send, &g_sent[0]));
}

TEST(DeferSends, TheOutermostScopesEndSendsOnce) {
  g_sent[0] = 0;
  {
    DeferSends outer;
    {
      DeferSends inner;  // (a post's, inside an answer handed over)
      EXPECT_TRUE(defer_sends(&count_send, &g_sent[0]));
      EXPECT_TRUE(defer_sends(&count_send, &g_sent[0]));  // queued again: still one send
    }
    EXPECT_EQ(g_sent[0], 0);
  }
  EXPECT_EQ(g_sent[0], 1);
  { DeferSends nothing_queued; }
  EXPECT_EQ(g_sent[0], 1);
}

TEST(DeferSends, ASecondTransportSendsAtOnce) {
  g_sent[0] = g_sent[1] = 0;
  {
    DeferSends scope;
    EXPECT_TRUE(defer_sends(&count_send, &g_sent[0]));
    EXPECT_FALSE(defer_sends(&count_send, &g_sent[1]));
  }
  EXPECT_EQ(g_sent[0], 1);
  EXPECT_EQ(g_sent[1], 0);  // (it sent itself, not through the scope)
}

}  // namespace
}  // namespace sv
