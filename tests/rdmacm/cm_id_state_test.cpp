// The CM id's state machine tables (src/rdmacm/cm_id_state.hpp): every state
// has a name of its own for the traces, and the transition table knows
// where each state can lead.
#include "../../src/rdmacm/cm_id_state.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace cm = softverbs::rdmacm;

namespace {

cm::IdState state(int i) { return static_cast<cm::IdState>(i); }

TEST(CmIdState, EveryStateHasADistinctName) {
  std::set<std::string> names;
  for (int i = 0; i < cm::kIdStateCount; ++i) {
    const char* name = cm::id_state_name(state(i));
    ASSERT_NE(name, nullptr) << i;
    EXPECT_STRNE(name, "") << i;
    EXPECT_STRNE(name, "?") << i;
    EXPECT_TRUE(names.insert(name).second) << "state " << i << " shares the name " << name;
  }
}

// A state added after Failed without moving kIdStateCount would be named
// here: the count would leave it out of every loop over the states.
TEST(CmIdState, CountCoversEveryState) {
  EXPECT_STREQ(cm::id_state_name(state(cm::kIdStateCount)), "?");
}

TEST(CmIdState, ConnectionLifeIsExpected) {
  using S = cm::IdState;
  // Active side: bind, resolve, connect, REP, DREQ.
  EXPECT_TRUE(cm::id_transition_expected(S::Idle, S::AddrBound));
  EXPECT_TRUE(cm::id_transition_expected(S::AddrBound, S::AddrResolved));
  EXPECT_TRUE(cm::id_transition_expected(S::AddrResolved, S::RouteResolved));
  EXPECT_TRUE(cm::id_transition_expected(S::RouteResolved, S::ConnectSent));
  EXPECT_TRUE(cm::id_transition_expected(S::ConnectSent, S::Established));
  EXPECT_TRUE(cm::id_transition_expected(S::Established, S::Disconnected));
  // Passive side: a listener's child, accept, RTU.
  EXPECT_TRUE(cm::id_transition_expected(S::Idle, S::RequestReceived));
  EXPECT_TRUE(cm::id_transition_expected(S::RequestReceived, S::Accepted));
  EXPECT_TRUE(cm::id_transition_expected(S::Accepted, S::Established));
  // The ends lead nowhere.
  for (int i = 0; i < cm::kIdStateCount; ++i) {
    EXPECT_FALSE(cm::id_transition_expected(S::Failed, state(i))) << cm::id_state_name(state(i));
    EXPECT_FALSE(cm::id_transition_expected(S::Disconnected, state(i))) << cm::id_state_name(state(i));
  }
}

}  // namespace
