// The RC roles' state names (transport/roce_roles.h), which the debug trace
// prints: one for every state, none twice.
#include "transport/roce_roles.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace sv::roce {
namespace {

template <typename State, int kCount>
void expect_named() {
  std::set<std::string> seen;
  for (int i = 0; i < kCount; ++i) {
    const std::string name = state_name(static_cast<State>(i));
    EXPECT_FALSE(name.empty());
    EXPECT_NE(name, "?") << "state " << i << " has no name";
    EXPECT_TRUE(seen.insert(name).second) << name << " named twice";
  }
  EXPECT_STREQ(state_name(static_cast<State>(kCount)), "?");
}

TEST(RoceRoles, EveryResponderStateHasItsOwnName) { expect_named<ResponderState, kResponderStates>(); }
TEST(RoceRoles, EveryCompleterStateHasItsOwnName) { expect_named<CompleterState, kCompleterStates>(); }

}  // namespace
}  // namespace sv::roce
