// Profile files (SOFTVERBS_PROFILE=FILE, core/device_profile.h): what a
// file may say, what it may not, and that no profile claims more than
// softverbs holds.
#include "core/device_profile.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/limits.h"

namespace sv {
namespace {

TEST(DeviceProfileFile, KeysOverTheBaseInOrder) {
  DeviceProfile p;
  std::string why;
  ASSERT_TRUE(parse_profile("# a comment\nbase = siw\nname = tiny\nmax_qp_wr = 0x100  # hex, as ibv_devinfo prints\n"
                            "max_sge: 2\natomic_cap = hca\nodp = 1\nfw_ver = 1.2.3\n",
                            &p, &why))
      << why;
  EXPECT_EQ(p.name, "tiny");
  EXPECT_EQ(p.max_qp_wr, 256u);
  EXPECT_EQ(p.max_sge, 2u);
  EXPECT_EQ(p.atomic_cap, IBV_ATOMIC_HCA);
  EXPECT_TRUE(p.odp);
  EXPECT_EQ(p.fw_ver, "1.2.3");
  EXPECT_EQ(p.vendor_id, 0x626d74u);  // the rest is siw's
  EXPECT_EQ(p.max_cqe, builtin_profile("siw")->max_cqe);
}

TEST(DeviceProfileFile, WithoutABaseSoftverbsOwnUnderneath) {
  DeviceProfile p;
  std::string why;
  ASSERT_TRUE(parse_profile("max_cqe = 1000\n", &p, &why)) << why;
  EXPECT_EQ(p.max_cqe, 1000u);
  EXPECT_EQ(p.max_qp_wr, limits::kMaxQpWr);
}

TEST(DeviceProfileFile, MistakesAreRefusedWithTheLine) {
  DeviceProfile p;
  std::string why;
  EXPECT_FALSE(parse_profile("max_qp_wr = 10\nmax_qpwr = 10\n", &p, &why));
  EXPECT_NE(why.find("line 2"), std::string::npos) << why;
  EXPECT_NE(why.find("unknown key 'max_qpwr'"), std::string::npos) << why;
  EXPECT_FALSE(parse_profile("max_sge = many\n", &p, &why));
  EXPECT_NE(why.find("not a number"), std::string::npos) << why;
  EXPECT_FALSE(parse_profile("base = cx99\n", &p, &why));
  EXPECT_NE(why.find("no built-in profile 'cx99'"), std::string::npos) << why;
  EXPECT_FALSE(parse_profile("atomic_cap = sometimes\n", &p, &why));
  EXPECT_FALSE(parse_profile("max_sge\n", &p, &why));
  EXPECT_FALSE(parse_profile("max_sge = -1\n", &p, &why));
}

TEST(DeviceProfileFile, NoLimitAboveWhatSoftverbsHolds) {
  DeviceProfile p;
  std::string why;
  ASSERT_TRUE(parse_profile("max_qp_wr = 1000000\nmax_sge = 64\nmax_qp_rd_atom = 128\nmax_sge_rd = 0\n", &p, &why));
  clamp_to_softverbs(&p);
  EXPECT_EQ(p.max_qp_wr, limits::kMaxQpWr);
  EXPECT_EQ(p.max_sge, limits::kMaxSge);  // (arrays of SGEs are this long)
  EXPECT_EQ(p.max_qp_rd_atom, limits::kMaxQpRdAtom);
  EXPECT_EQ(p.max_sge_rd, 0u);  // lower is kept
}

// Each built-in profile, as loaded (clamped): never above softverbs, and
// where the device allows less, the device's.
TEST(DeviceProfileBuiltins, ClampedToSoftverbsKeepingWhatTheDeviceAllowsLess) {
  for (const char* name : {"softverbs", "rxe", "siw", "cx5", "cx6", "cx7"}) {
    const DeviceProfile* p = builtin_profile(name);
    ASSERT_NE(p, nullptr) << name;
    DeviceProfile c = *p;
    clamp_to_softverbs(&c);
    EXPECT_LE(c.max_qp_wr, limits::kMaxQpWr) << name;
    EXPECT_LE(c.max_sge, limits::kMaxSge) << name;
    EXPECT_LE(c.max_cqe, limits::kMaxCqe) << name;
    EXPECT_LE(c.max_qp_rd_atom, limits::kMaxQpRdAtom) << name;
    EXPECT_LE(c.max_msg_sz, limits::kMaxMsgSize) << name;
    EXPECT_EQ(c.max_sge, std::min<uint64_t>(p->max_sge, limits::kMaxSge)) << name;
    EXPECT_EQ(c.max_cqe, std::min<uint64_t>(p->max_cqe, limits::kMaxCqe)) << name;
  }
  EXPECT_EQ(builtin_profile("siw")->max_sge, 6u);
  EXPECT_EQ(builtin_profile("cx99"), nullptr);
}

}  // namespace
}  // namespace sv
