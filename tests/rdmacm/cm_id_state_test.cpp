// The CM id's state machine tables (src/rdmacm/cm_id_state.h): every state
// has a name of its own for the traces, and the transition table knows
// where each state can lead.
#include "../../src/rdmacm/cm_id_state.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace cm = sv::rdmacm;

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
  EXPECT_TRUE(cm::id_transition_expected(S::kIdle, S::kAddrBound));
  EXPECT_TRUE(cm::id_transition_expected(S::kAddrBound, S::kAddrResolved));
  EXPECT_TRUE(cm::id_transition_expected(S::kAddrResolved, S::kRouteResolved));
  EXPECT_TRUE(cm::id_transition_expected(S::kRouteResolved, S::kConnectSent));
  EXPECT_TRUE(cm::id_transition_expected(S::kConnectSent, S::kEstablished));
  EXPECT_TRUE(cm::id_transition_expected(S::kEstablished, S::kDisconnected));
  // Passive side: a listener's child, accept, RTU.
  EXPECT_TRUE(cm::id_transition_expected(S::kIdle, S::kRequestReceived));
  EXPECT_TRUE(cm::id_transition_expected(S::kRequestReceived, S::kAccepted));
  EXPECT_TRUE(cm::id_transition_expected(S::kAccepted, S::kEstablished));
  // The ends lead nowhere.
  for (int i = 0; i < cm::kIdStateCount; ++i) {
    EXPECT_FALSE(cm::id_transition_expected(S::kFailed, state(i))) << cm::id_state_name(state(i));
    EXPECT_FALSE(cm::id_transition_expected(S::kDisconnected, state(i))) << cm::id_state_name(state(i));
  }
}

}  // namespace
