// Device profiles (SOFTVERBS_PROFILE, core/device_profile.h), seen only
// through the verbs: each CTest entry runs this program under one profile
// (profile_<name>), and it checks that the device reports what that real
// device reports (the values below are the public sources' that
// docs/profiles.md cites, written out again here, not read from our
// tables), and refuses what that device refuses: a QP, CQ or SRQ beyond its
// limits, an atomic where it has none, on-demand paging where it lacks it,
// a message longer than its ports carry.
#include <fcntl.h>

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "verbs_fixture.h"

namespace {

struct Expected {
  const char* name;
  uint32_t vendor_id, vendor_part_id;
  int max_qp_wr, max_sge, max_sge_rd, max_cqe, max_srq_wr, max_srq_sge;
  int max_qp_rd_atom, max_qp_init_rd_atom;
  ibv_atomic_cap atomic_cap;
  bool odp;
  uint32_t max_msg_sz;
  uint32_t max_inline;  // the most a QP may ask for
};

// softverbs' own, then each device's as docs/profiles.md cites it. Where a
// device allows more than softverbs holds, softverbs' limit is what is
// reported (and enforced), written here as min(device's, softverbs'): work
// requests per queue 32768, READs and atomics in flight 16 (the RoCE
// responder's read replays), a message 2 GiB.
constexpr int kOwnWr = 32768, kOwnRdAtom = 16;
constexpr uint32_t kOwnMsg = 1u << 31;
constexpr Expected kExpected[] = {
    // name, vendor, part, qp_wr, sge, sge_rd, cqe, srq_wr, srq_sge, rd_atom, init_rd_atom, atomics, odp, msg, inline
    {"softverbs", 0xffffff, 0, kOwnWr, 32, 32, 4194303, kOwnWr, 32, kOwnRdAtom, kOwnRdAtom, IBV_ATOMIC_HCA, true,
     kOwnMsg, 1024},
    // rxe_param.h: RXE_MAX_QP_WR 1 << 20, RXE_MAX_SGE 32, RXE_MAX_CQE 32767,
    // RXE_MAX_SRQ_SGE 27, RXE_MAX_QP_RD_ATOM 128, RXE_PORT_MAX_MSG_SZ 8 MiB,
    // RXE_MAX_INLINE_DATA 512.
    {"rxe", 0xffffff, 0, kOwnWr, 32, 32, 32767, kOwnWr, 27, kOwnRdAtom, kOwnRdAtom, IBV_ATOMIC_HCA, false,
     0x800000, 512},
    // siw.h: SIW_MAX_QP_WR 32768, SIW_MAX_SGE 6, SIW_MAX_SGE_RD 1,
    // SIW_MAX_CQE 3276800, SIW_MAX_SRQ_WR 327680, no atomics, max_msg_sz
    // -1, SIW_MAX_INLINE 80.
    {"siw", 0x626d74, 1, kOwnWr, 6, 1, 3276800, kOwnWr, 6, kOwnRdAtom, kOwnRdAtom, IBV_ATOMIC_NONE, false, kOwnMsg,
     80},
    // ConnectX dumps: max_qp_wr 32768, max_sge 30, max_sge_rd 30, max_cqe
    // 4194303, max_srq_wr 32767, max_srq_sge 31, rd_atom 16, ATOMIC_HCA,
    // ODP, max_msg_sz 1 GiB; RC inline 988 (mlx5).
    {"cx5", 0x02c9, 4119, kOwnWr, 30, 30, 4194303, 32767, 31, 16, 16, IBV_ATOMIC_HCA, true, 0x40000000, 988},
    {"cx6", 0x02c9, 4123, kOwnWr, 30, 30, 4194303, 32767, 31, 16, 16, IBV_ATOMIC_HCA, true, 0x40000000, 988},
    {"cx7", 0x02c9, 4129, kOwnWr, 30, 30, 4194303, 32767, 31, 16, 16, IBV_ATOMIC_HCA, true, 0x40000000, 988},
};

const Expected& expected() {
  const char* name = std::getenv("SOFTVERBS_PROFILE");
  const std::string n = name && *name ? name : "softverbs";
  for (const Expected& e : kExpected)
    if (n == e.name) return e;
  ADD_FAILURE() << "no expectations for profile " << n;
  return kExpected[0];
}

class Profile : public ::testing::Test {
 protected:
  svtest::Device dev;
  const Expected& want = expected();
  ibv_device_attr_ex attr{};
  void SetUp() override {
    ASSERT_NE(dev.ctx, nullptr);
    ASSERT_EQ(ibv_query_device_ex(dev.ctx, nullptr, &attr), 0);
  }
};

TEST_F(Profile, ReportsThatDevicesIdentityAndLimits) {
  const ibv_device_attr& a = attr.orig_attr;
  EXPECT_EQ(a.vendor_id, want.vendor_id);
  EXPECT_EQ(a.vendor_part_id, want.vendor_part_id);
  EXPECT_EQ(a.max_qp_wr, want.max_qp_wr);
  EXPECT_EQ(a.max_sge, want.max_sge);
  EXPECT_EQ(a.max_sge_rd, want.max_sge_rd);
  EXPECT_EQ(a.max_cqe, want.max_cqe);
  EXPECT_EQ(a.max_srq_wr, want.max_srq_wr);
  EXPECT_EQ(a.max_srq_sge, want.max_srq_sge);
  EXPECT_EQ(a.max_qp_rd_atom, want.max_qp_rd_atom);
  EXPECT_EQ(a.max_qp_init_rd_atom, want.max_qp_init_rd_atom);
  EXPECT_EQ(a.atomic_cap, want.atomic_cap);
  EXPECT_EQ((attr.odp_caps.general_caps & IBV_ODP_SUPPORT) != 0, want.odp);
  ibv_port_attr port{};
  ASSERT_EQ(ibv_query_port(dev.ctx, 1, &port), 0);
  EXPECT_EQ(port.max_msg_sz, want.max_msg_sz);
}

// ibv_create_qp(3): caps up to the device's are granted (and written back
// no smaller); one more is EINVAL.
TEST_F(Profile, AQpUpToTheLimitsIsCreatedAndBeyondThemIsNot) {
  ibv_cq* cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  auto attempt = [&](uint32_t wr, uint32_t sge, uint32_t inl) {
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap = {wr, wr, sge, sge, inl};
    errno = 0;
    ibv_qp* qp = ibv_create_qp(dev.pd, &ia);
    const int err = qp ? 0 : errno;
    if (qp) {
      EXPECT_GE(ia.cap.max_send_wr, wr);
      EXPECT_GE(ia.cap.max_send_sge, sge);
      EXPECT_GE(ia.cap.max_inline_data, inl);
      EXPECT_LE(ia.cap.max_inline_data, want.max_inline) << "more inline than the device has";
      ibv_destroy_qp(qp);
    }
    return err;
  };
  const uint32_t wr = static_cast<uint32_t>(want.max_qp_wr), sge = static_cast<uint32_t>(want.max_sge);
  EXPECT_EQ(attempt(wr, sge, want.max_inline), 0);
  EXPECT_EQ(attempt(wr + 1, 1, 0), EINVAL);
  EXPECT_EQ(attempt(1, sge + 1, 0), EINVAL);
  EXPECT_EQ(attempt(1, 1, want.max_inline + 1), EINVAL);
  ibv_destroy_cq(cq);
}

TEST_F(Profile, ACqOrSrqBeyondTheLimitsIsRefused) {
  errno = 0;
  EXPECT_EQ(ibv_create_cq(dev.ctx, want.max_cqe + 1, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_srq* srq = svtest::create_srq(dev.pd, static_cast<uint32_t>(want.max_srq_wr), static_cast<uint32_t>(want.max_srq_sge));
  EXPECT_NE(srq, nullptr) << strerror(errno);
  if (srq) ibv_destroy_srq(srq);
  errno = 0;
  EXPECT_EQ(svtest::create_srq(dev.pd, static_cast<uint32_t>(want.max_srq_wr) + 1), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(svtest::create_srq(dev.pd, 4, static_cast<uint32_t>(want.max_srq_sge) + 1), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

// A device without atomics refuses the post (siw: EINVAL), one with them
// carries it out.
TEST_F(Profile, AnAtomicIsRefusedWhereTheDeviceHasNone) {
  svtest::QpPair pair(dev, IBV_QPT_RC);
  svtest::Buffer local(dev.pd, 8), remote(dev.pd, 8, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
  ibv_sge sge = local.sge(0, 8);
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.atomic.remote_addr = remote.addr();
  wr.wr.atomic.rkey = remote.mr->rkey;
  wr.wr.atomic.compare_add = 1;
  if (want.atomic_cap == IBV_ATOMIC_NONE) {
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(pair.a, &wr, &bad), EINVAL);
    EXPECT_EQ(bad, &wr);
  } else {
    EXPECT_EQ(svtest::post_and_wait(pair.a, pair.cq_a, wr), IBV_WC_SUCCESS);
  }
}

// Memory windows, XRC domains and address handles only where the device
// has them: siw has no windows (SIW_MAX_MW 0) and, iWARP, no address
// handles; neither siw nor rxe has XRC (IBV_DEVICE_XRC). Their providers
// have no such verb: EOPNOTSUPP.
TEST_F(Profile, WindowsXrcAndAddressHandlesOnlyWhereTheDeviceHasThem) {
  const std::string name = want.name;
  errno = 0;
  ibv_mw* mw = ibv_alloc_mw(dev.pd, IBV_MW_TYPE_1);
  if (name == "siw") {
    EXPECT_EQ(mw, nullptr);
    EXPECT_EQ(errno, EOPNOTSUPP);
  } else {
    ASSERT_NE(mw, nullptr) << strerror(errno);
    EXPECT_EQ(ibv_dealloc_mw(mw), 0);
  }
  EXPECT_EQ(static_cast<bool>(attr.orig_attr.device_cap_flags & IBV_DEVICE_XRC), name != "siw" && name != "rxe");
  ibv_xrcd_init_attr xa{};
  xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  xa.fd = -1;
  xa.oflags = O_CREAT;
  errno = 0;
  ibv_xrcd* xrcd = ibv_open_xrcd(dev.ctx, &xa);
  if (name == "siw" || name == "rxe") {
    EXPECT_EQ(xrcd, nullptr);
    EXPECT_EQ(errno, EOPNOTSUPP);
  } else {
    ASSERT_NE(xrcd, nullptr) << strerror(errno);
    EXPECT_EQ(ibv_close_xrcd(xrcd), 0);
  }
  errno = 0;
  ibv_ah* ah = svtest::make_ah(dev.pd, dev.gid_index);
  if (name == "siw") {
    EXPECT_EQ(ah, nullptr);
    EXPECT_EQ(errno, EOPNOTSUPP);
  } else {
    ASSERT_NE(ah, nullptr) << strerror(errno);
    EXPECT_EQ(ibv_destroy_ah(ah), 0);
  }
}

// ibv_reg_mr(3) with IBV_ACCESS_ON_DEMAND on a device without on-demand
// paging: EOPNOTSUPP (the kernel's ib_check_mr_access).
TEST_F(Profile, OnDemandPagingOnlyWhereTheDeviceHasIt) {
  static char buf[4096];
  errno = 0;
  ibv_mr* mr = ibv_reg_mr(dev.pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
  if (want.odp) {
    EXPECT_NE(mr, nullptr) << strerror(errno);
  } else {
    EXPECT_EQ(mr, nullptr);
    EXPECT_EQ(errno, EOPNOTSUPP);
  }
  if (mr) ibv_dereg_mr(mr);
}

// A message longer than the port's max_msg_sz ends in LOC_LEN_ERR. (Its
// SGEs name one buffer twice: the length counts, not the memory.)
TEST_F(Profile, AMessageLongerThanTheDeviceCarriesEndsInALengthError) {
  if (want.max_msg_sz > (64u << 20)) GTEST_SKIP() << "max_msg_sz " << want.max_msg_sz << ": too long to try here";
  svtest::QpPair pair(dev, IBV_QPT_RC);
  const uint32_t half = want.max_msg_sz / 2 + 1;
  svtest::Buffer local(dev.pd, half), remote(dev.pd, 2 * size_t{half});
  ibv_sge sges[2] = {local.sge(0, half), local.sge(0, half)};
  const ibv_send_wr wr = svtest::write_wr(sges, 2, remote.addr(), remote.mr->rkey);
  EXPECT_EQ(svtest::post_and_wait(pair.a, pair.cq_a, wr), IBV_WC_LOC_LEN_ERR);
}

}  // namespace
