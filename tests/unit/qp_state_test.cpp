#include "core/qp_state.h"

#include <gtest/gtest.h>

namespace sv {
namespace {

TEST(QpState, CurStateOnlyFromRtrRtsSqdSqe) {
  EXPECT_FALSE(qp_mask_ok(IBV_QPS_INIT, IBV_QPS_INIT, IBV_QPT_RC, IBV_QP_STATE | IBV_QP_CUR_STATE));
  EXPECT_TRUE(qp_mask_ok(IBV_QPS_RTS, IBV_QPS_RTS, IBV_QPT_RC, IBV_QP_STATE | IBV_QP_CUR_STATE));
}

TEST(QpState, AnyStateToResetAndErrExceptResetToErr) {
  for (int s = IBV_QPS_RESET; s <= IBV_QPS_ERR; ++s) {
    EXPECT_TRUE(qp_mask_ok(static_cast<ibv_qp_state>(s), IBV_QPS_RESET, IBV_QPT_UD, IBV_QP_STATE));
    EXPECT_EQ(qp_mask_ok(static_cast<ibv_qp_state>(s), IBV_QPS_ERR, IBV_QPT_UD, IBV_QP_STATE), s != IBV_QPS_RESET);
  }
}

TEST(QpState, NoTransitionIntoSqe) {
  for (int s = IBV_QPS_RESET; s <= IBV_QPS_ERR; ++s)
    EXPECT_FALSE(qp_transition(static_cast<ibv_qp_state>(s), IBV_QPS_SQE, IBV_QPT_UC).valid);
}

}  // namespace
}  // namespace sv
