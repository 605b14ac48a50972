// Multicast verbs on UD QPs: attach/detach, delivery to every attached QP of
// the host (in this process and in another one), and ibv_destroy_qp failing
// while attached (ibv_create_qp(3), NOTES).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "sanitizers.h"
#include "verbs_fixture.h"

using namespace svtest;

namespace {

ibv_gid group_gid(const char* ipv4_group) {
  ibv_gid g{};
  g.raw[10] = g.raw[11] = 0xff;
  inet_pton(AF_INET, ipv4_group, g.raw + 12);
  return g;
}

ibv_qp* make_ud_qp(Device& dev, ibv_cq* cq) {
  ibv_qp_init_attr ia{};
  ia.qp_type = IBV_QPT_UD;
  ia.send_cq = ia.recv_cq = cq;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(dev.pd, &ia);
  if (qp && connect_qp(qp, 0, 0x1234)) return nullptr;
  return qp;
}

void post_receive(ibv_qp* qp, const Buffer& buf, size_t off) {
  ibv_sge s = buf.sge(off, 512);
  ibv_recv_wr wr{};
  wr.wr_id = off;
  wr.sg_list = &s;
  wr.num_sge = 1;
  ibv_recv_wr* bad;
  ASSERT_EQ(ibv_post_recv(qp, &wr, &bad), 0);
}

int send_to_group(Device& dev, ibv_qp* qp, const ibv_gid& gid, Buffer& buf, const char* text) {
  ibv_ah_attr aa{};
  aa.is_global = 1;
  aa.port_num = 1;
  aa.grh.dgid = gid;
  aa.grh.sgid_index = static_cast<uint8_t>(dev.gid_index);
  aa.grh.hop_limit = 1;
  ibv_ah* ah = ibv_create_ah(dev.pd, &aa);
  if (!ah) return errno;
  std::strcpy(reinterpret_cast<char*>(buf.bytes.data()), text);
  ibv_sge s = buf.sge(0, static_cast<uint32_t>(std::strlen(text) + 1));
  ibv_send_wr wr{};
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = 0xffffff;
  wr.wr.ud.remote_qkey = 0x1234;
  ibv_send_wr* bad;
  int rc = ibv_post_send(qp, &wr, &bad);
  ibv_destroy_ah(ah);
  return rc;
}

}  // namespace

TEST(Multicast, DeviceAdvertisesGroups) {
  Device dev;
  ibv_device_attr a;
  ASSERT_EQ(ibv_query_device(dev.ctx, &a), 0);
  EXPECT_GT(a.max_mcast_grp, 0);
  EXPECT_GT(a.max_mcast_qp_attach, 0);
}

TEST(Multicast, EveryAttachedQpReceivesAndDestroyWaitsForDetach) {
  Device dev;
  ibv_cq* cq = ibv_create_cq(dev.ctx, 64, nullptr, nullptr, 0);
  ibv_qp* sender = make_ud_qp(dev, cq);
  ibv_qp* r1 = make_ud_qp(dev, cq);
  ibv_qp* r2 = make_ud_qp(dev, cq);
  ibv_qp* outsider = make_ud_qp(dev, cq);
  ASSERT_TRUE(sender && r1 && r2 && outsider);
  Buffer buf(dev.pd, 8192);
  const ibv_gid gid = group_gid("239.1.2.3");
  ASSERT_EQ(ibv_attach_mcast(r1, &gid, 0), 0);
  ASSERT_EQ(ibv_attach_mcast(r2, &gid, 0), 0);
  post_receive(r1, buf, 1024);
  post_receive(r2, buf, 2048);
  post_receive(outsider, buf, 3072);
  ASSERT_EQ(send_to_group(dev, sender, gid, buf, "to the group"), 0);
  auto wcs = poll_n(cq, 3);
  ASSERT_EQ(wcs.size(), 3u);  // one send, two receives; the outsider got nothing
  int receives = 0;
  for (const ibv_wc& wc : wcs) {
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    if (wc.opcode == IBV_WC_RECV) {
      ++receives;
      EXPECT_TRUE(wc.qp_num == r1->qp_num || wc.qp_num == r2->qp_num);
      EXPECT_EQ(wc.src_qp, sender->qp_num);
      EXPECT_STREQ(reinterpret_cast<char*>(buf.bytes.data() + wc.wr_id + 40), "to the group");
    }
  }
  EXPECT_EQ(receives, 2);
  EXPECT_TRUE(poll_n(cq, 1, 100).empty());

  EXPECT_EQ(ibv_destroy_qp(r1), EBUSY);  // still attached
  EXPECT_EQ(ibv_detach_mcast(r1, &gid, 0), 0);
  EXPECT_EQ(ibv_detach_mcast(r1, &gid, 0), EINVAL);  // no longer attached
  EXPECT_EQ(ibv_destroy_qp(r1), 0);
  EXPECT_EQ(ibv_detach_mcast(r2, &gid, 0), 0);
  ibv_destroy_qp(r2);
  ibv_destroy_qp(outsider);
  ibv_destroy_qp(sender);
  ibv_destroy_cq(cq);
}

// A sender attached to its own group hears itself (loopback is on), unless
// it was created with IBV_QP_CREATE_BLOCK_SELF_MCAST_LB; others still hear it.
TEST(Multicast, BlockSelfLoopbackCreateFlag) {
  Device dev;
  ibv_cq* cq = ibv_create_cq(dev.ctx, 64, nullptr, nullptr, 0);
  for (bool block : {false, true}) {
    ibv_qp_init_attr_ex ia{};
    ia.qp_type = IBV_QPT_UD;
    ia.send_cq = ia.recv_cq = cq;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
    ia.pd = dev.pd;
    ia.create_flags = block ? IBV_QP_CREATE_BLOCK_SELF_MCAST_LB : 0;
    ibv_qp* sender = ibv_create_qp_ex(dev.ctx, &ia);
    ASSERT_NE(sender, nullptr);
    ASSERT_EQ(connect_qp(sender, 0, 0x1234), 0);
    ibv_qp* other = make_ud_qp(dev, cq);
    ASSERT_NE(other, nullptr);
    Buffer buf(dev.pd, 8192);
    const ibv_gid gid = group_gid("239.1.2.4");
    ASSERT_EQ(ibv_attach_mcast(sender, &gid, 0), 0);
    ASSERT_EQ(ibv_attach_mcast(other, &gid, 0), 0);
    post_receive(sender, buf, 1024);
    post_receive(other, buf, 2048);
    ASSERT_EQ(send_to_group(dev, sender, gid, buf, "hello"), 0);
    auto wcs = poll_n(cq, block ? 2 : 3);
    int to_self = 0, to_other = 0;
    for (const ibv_wc& wc : wcs) {
      if (wc.opcode != IBV_WC_RECV) continue;
      to_self += wc.qp_num == sender->qp_num;
      to_other += wc.qp_num == other->qp_num;
    }
    EXPECT_EQ(to_other, 1);
    EXPECT_EQ(to_self, block ? 0 : 1) << "block=" << block;
    EXPECT_TRUE(poll_n(cq, 1, 100).empty());
    ibv_detach_mcast(sender, &gid, 0);
    ibv_detach_mcast(other, &gid, 0);
    ibv_destroy_qp(sender);  // flushes the unused receive
    ibv_destroy_qp(other);
    poll_n(cq, 4, 100);
  }
  ibv_destroy_cq(cq);
}

TEST(Multicast, OnlyUdQpsAndMulticastGids) {
  Device dev;
  QpPair rc(dev, IBV_QPT_RC);
  const ibv_gid gid = group_gid("239.1.2.4");
  EXPECT_EQ(ibv_attach_mcast(rc.a, &gid, 0), EINVAL);
  ibv_cq* cq = ibv_create_cq(dev.ctx, 8, nullptr, nullptr, 0);
  ibv_qp* ud = make_ud_qp(dev, cq);
  ASSERT_NE(ud, nullptr);
  const ibv_gid unicast = group_gid("127.0.0.1");
  EXPECT_EQ(ibv_attach_mcast(ud, &unicast, 0), EINVAL);
  ibv_destroy_qp(ud);
  ibv_destroy_cq(cq);
}

TEST(Multicast, ReachesAnotherProcess) {
  SV_SKIP_IF_FORK_UNSUPPORTED();
  const ibv_gid gid = group_gid("239.1.2.5");
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  if (child == 0) {
    alarm(20);
    Device dev;
    ibv_cq* cq = ibv_create_cq(dev.ctx, 8, nullptr, nullptr, 0);
    ibv_qp* qp = make_ud_qp(dev, cq);
    Buffer buf(dev.pd, 4096);
    if (!qp || ibv_attach_mcast(qp, &gid, 0)) _exit(2);
    ibv_sge s = buf.sge(0, 512);
    ibv_recv_wr wr{};
    wr.sg_list = &s;
    wr.num_sge = 1;
    ibv_recv_wr* bad;
    if (ibv_post_recv(qp, &wr, &bad)) _exit(3);
    char c = 1;
    if (write(ready[1], &c, 1) != 1) _exit(4);
    auto wcs = poll_n(cq, 1, 10000);
    bool ok = wcs.size() == 1 && wcs[0].status == IBV_WC_SUCCESS &&
              std::strcmp(reinterpret_cast<char*>(buf.bytes.data() + 40), "across processes") == 0;
    ibv_detach_mcast(qp, &gid, 0);
    _exit(ok ? 0 : 5);
  }
  close(ready[1]);  // so a child that dies early ends the wait below
  char c;
  pollfd pfd{ready[0], POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, 10000), 1) << "the child did not get ready";
  ASSERT_EQ(read(ready[0], &c, 1), 1) << "the child died before getting ready";
  close(ready[0]);
  Device dev;
  ibv_cq* cq = ibv_create_cq(dev.ctx, 8, nullptr, nullptr, 0);
  ibv_qp* qp = make_ud_qp(dev, cq);
  ASSERT_NE(qp, nullptr);
  Buffer buf(dev.pd, 4096);
  ASSERT_EQ(send_to_group(dev, qp, gid, buf, "across processes"), 0);
  EXPECT_EQ(poll_n(cq, 1).size(), 1u);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
}
