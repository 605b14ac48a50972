// Device, port, GID and P_Key queries, and the enum-to-string / rate helper
// functions compared with Debian's own libibverbs (loaded in a separate link
// namespace so its symbols cannot be confused with ours).
#include <arpa/inet.h>
#include <dlfcn.h>
#include <endian.h>
#include <gtest/gtest.h>
#include <link.h>
#include <net/if.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "sanitizers.h"
#include "verbs_fixture.h"
#include "verbs_test_util.h"

using namespace svtest;

namespace {

ibv_gid loopback_gid() {
  ibv_gid g{};
  g.raw[10] = g.raw[11] = 0xff;
  inet_pton(AF_INET, "127.0.0.1", g.raw + 12);
  return g;
}

bool gid_is_zero(const ibv_gid& g) {
  for (uint8_t b : g.raw)
    if (b) return false;
  return true;
}

TEST(DeviceList, HasExactlyOneDevice) {
  int n = -1;
  ibv_device** list = ibv_get_device_list(&n);
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(n, 1);
  EXPECT_NE(list[0], nullptr);
  EXPECT_EQ(list[1], nullptr) << "the list is NULL-terminated";
  const char* name = ibv_get_device_name(list[0]);
  ASSERT_NE(name, nullptr);
  EXPECT_GT(std::strlen(name), 0u);
  ibv_free_device_list(list);
}

TEST(DeviceQuery, QueryDeviceAndExAgreeAndArePlausible) {
  Device dev;
  ibv_device_attr a;
  std::memset(&a, 0xa5, sizeof a);
  ASSERT_EQ(ibv_query_device(dev.ctx, &a), 0);
  ibv_device_attr_ex ax;
  std::memset(&ax, 0x5a, sizeof ax);
  ASSERT_EQ(ibv_query_device_ex(dev.ctx, nullptr, &ax), 0);
  const ibv_device_attr& o = ax.orig_attr;

  EXPECT_STREQ(a.fw_ver, o.fw_ver);
#define SAME(f) EXPECT_EQ(a.f, o.f) << #f
  SAME(node_guid);
  SAME(sys_image_guid);
  SAME(max_mr_size);
  SAME(page_size_cap);
  SAME(vendor_id);
  SAME(vendor_part_id);
  SAME(hw_ver);
  SAME(max_qp);
  SAME(max_qp_wr);
  SAME(device_cap_flags);
  SAME(max_sge);
  SAME(max_sge_rd);
  SAME(max_cq);
  SAME(max_cqe);
  SAME(max_mr);
  SAME(max_pd);
  SAME(max_qp_rd_atom);
  SAME(max_ee_rd_atom);
  SAME(max_res_rd_atom);
  SAME(max_qp_init_rd_atom);
  SAME(max_ee_init_rd_atom);
  SAME(atomic_cap);
  SAME(max_ee);
  SAME(max_rdd);
  SAME(max_mw);
  SAME(max_raw_ipv6_qp);
  SAME(max_raw_ethy_qp);
  SAME(max_mcast_grp);
  SAME(max_mcast_qp_attach);
  SAME(max_total_mcast_qp_attach);
  SAME(max_ah);
  SAME(max_fmr);
  SAME(max_map_per_fmr);
  SAME(max_srq);
  SAME(max_srq_wr);
  SAME(max_srq_sge);
  SAME(max_pkeys);
  SAME(local_ca_ack_delay);
  SAME(phys_port_cnt);
#undef SAME

  EXPECT_GT(a.max_qp, 0);
  EXPECT_GT(a.max_qp_wr, 0);
  EXPECT_GT(a.max_sge, 0);
  EXPECT_GT(a.max_cq, 0);
  EXPECT_GT(a.max_cqe, 0);
  EXPECT_GT(a.max_mr, 0);
  EXPECT_GT(a.max_pd, 0);
  EXPECT_GT(a.max_mr_size, 0u);
  EXPECT_GT(a.max_srq, 0);
  EXPECT_GT(a.max_srq_wr, 0);
  EXPECT_GT(a.max_srq_sge, 0);
  EXPECT_GE(a.max_pkeys, 1);
  EXPECT_EQ(a.phys_port_cnt, 1);
  EXPECT_TRUE(a.atomic_cap == IBV_ATOMIC_NONE || a.atomic_cap == IBV_ATOMIC_HCA || a.atomic_cap == IBV_ATOMIC_GLOB)
      << "atomic_cap " << a.atomic_cap;
  EXPECT_GT(std::strlen(a.fw_ver), 0u);

  EXPECT_NE(ax.completion_timestamp_mask, 0u);
  EXPECT_NE(ax.hca_core_clock, 0u);
}

TEST(DeviceQuery, NodeGuidIsNonZeroAndMatchesDeviceGuid) {
  Device dev;
  ibv_device_attr a{};
  ASSERT_EQ(ibv_query_device(dev.ctx, &a), 0);
  EXPECT_NE(a.node_guid, 0u);
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ASSERT_NE(list, nullptr);
  ASSERT_GE(n, 1);
  EXPECT_EQ(ibv_get_device_guid(list[0]), a.node_guid) << "both are big-endian (__be64)";
  ibv_free_device_list(list);
}

TEST(PortQuery, PortOneIsActiveEthernet) {
  Device dev;
  ibv_port_attr pa;
  std::memset(&pa, 0xcc, sizeof pa);
  ASSERT_EQ(ibv_query_port(dev.ctx, 1, &pa), 0);
  EXPECT_EQ(pa.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_GT(pa.gid_tbl_len, 0);
  EXPECT_GE(pa.pkey_tbl_len, 1);
  EXPECT_EQ(pa.max_mtu, IBV_MTU_4096);
  EXPECT_GE(pa.active_mtu, IBV_MTU_256);
  EXPECT_LE(pa.active_mtu, pa.max_mtu);
  EXPECT_GT(pa.max_msg_sz, 0u);
}

// A number from /sys/class/net/<ifname>/<attr>; -1 when unreadable.
long sysfs_net(const char* ifname, const char* attr) {
  std::string path = std::string("/sys/class/net/") + ifname + "/" + attr;
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return -1;
  long v = -1;
  if (std::fscanf(f, "%li", &v) != 1) v = -1;
  std::fclose(f);
  return v;
}

// As Linux rxe (rxe_set_mtu): active_mtu follows the MTU of the network
// device behind the port, less 80 bytes of RoCEv2 headers, rounded down to
// an IB MTU. Here the port's network device is the interface of the first
// GID not on loopback; with none (only lo), 4096.
TEST(PortQuery, ActiveMtuFollowsTheFirstNetworkInterface) {
  Device dev;
  ibv_port_attr pa{};
  ASSERT_EQ(ibv_query_port(dev.ctx, 1, &pa), 0);
  long link_mtu = -1;
  std::string ifname;
  for (uint32_t i = 0; i < static_cast<uint32_t>(pa.gid_tbl_len); ++i) {
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(dev.ctx, 1, i, &e, 0) != 0) break;
    char name[IF_NAMESIZE] = {};
    if (!if_indextoname(e.ndev_ifindex, name)) continue;
    if (sysfs_net(name, "flags") & IFF_LOOPBACK) continue;
    link_mtu = sysfs_net(name, "mtu");
    ifname = name;
    break;
  }
  ibv_mtu expect = IBV_MTU_4096;
  if (link_mtu >= 0) {
    const long room = link_mtu - 80;
    expect = room >= 4096 ? IBV_MTU_4096 : room >= 2048 ? IBV_MTU_2048 : room >= 1024 ? IBV_MTU_1024
           : room >= 512 ? IBV_MTU_512 : IBV_MTU_256;
  }
  EXPECT_EQ(pa.active_mtu, expect) << "first network interface: " << (ifname.empty() ? "none" : ifname)
                                   << ", MTU " << link_mtu;
  EXPECT_EQ(pa.max_mtu, IBV_MTU_4096);
}

TEST(PortQuery, InvalidPortNumbersFail) {
  Device dev;
  for (uint8_t port : {0, 2, 255}) {
    SCOPED_TRACE(int(port));
    ibv_port_attr pa{};
    EXPECT_NE(ibv_query_port(dev.ctx, port, &pa), 0);
  }
}

TEST(GidQuery, LoopbackGidIsPresent) {
  Device dev;
  EXPECT_GE(loopback_gid_index(dev.ctx), 0) << "::ffff:127.0.0.1 must be in the GID table";
  EXPECT_EQ(dev.gid_index, loopback_gid_index(dev.ctx));
}

// A process at its RLIMIT_NOFILE cannot read the host's addresses
// (getifaddrs needs a netlink socket); its GID table stays as last read, as
// a device's does. Taken as empty, every GID query (and a QP's modify to
// RTR) failed: ucmatose's server, 40 open files, failed rdma_accept with
// EINVAL. In a child: the limit is the process's.
TEST(GidQuery, TableOutlivesAProcessOutOfFileDescriptors) {
  SV_SKIP_IF_FORK_UNSUPPORTED();
  Device dev;
  const int idx = loopback_gid_index(dev.ctx);
  ASSERT_GE(idx, 0);
  ibv_gid before{};
  ASSERT_EQ(ibv_query_gid(dev.ctx, 1, idx, &before), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ibv_gid after{};  // (the child's first verb takes the context over: it opens files)
    if (ibv_query_gid(dev.ctx, 1, idx, &after) != 0) _exit(9);
    std::vector<int> held;  // every fd the limit allows
    for (int fd; (fd = dup(0)) >= 0;) held.push_back(fd);
    if (errno != EMFILE) _exit(10);
    sleep(2);  // past the table's 1 s cache: the next query reads again
    if (ibv_query_gid(dev.ctx, 1, idx, &after) != 0) _exit(11);
    if (std::memcmp(&after, &before, sizeof after) != 0) _exit(12);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "9: the child's first query failed; 10: no EMFILE; 11: the query failed; 12: another GID";
}

TEST(GidQuery, QueryGidExGivesRoceV2ForLoopback) {
  Device dev;
  int idx = loopback_gid_index(dev.ctx);
  ASSERT_GE(idx, 0);
  ibv_gid_entry e;
  std::memset(&e, 0xee, sizeof e);
  ASSERT_EQ(ibv_query_gid_ex(dev.ctx, 1, static_cast<uint32_t>(idx), &e, 0), 0);
  ibv_gid want = loopback_gid();
  EXPECT_EQ(std::memcmp(&e.gid, &want, sizeof want), 0);
  EXPECT_EQ(e.gid_index, static_cast<uint32_t>(idx));
  EXPECT_EQ(e.port_num, 1u);
  EXPECT_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V2);

  // The underscore entry point, as the inline wrapper calls it.
  ibv_gid_entry e2{};
  ASSERT_EQ(_ibv_query_gid_ex(dev.ctx, 1, static_cast<uint32_t>(idx), &e2, 0, sizeof e2), 0);
  EXPECT_EQ(e2.gid_type, IBV_GID_TYPE_ROCE_V2);
  EXPECT_EQ(std::memcmp(&e2.gid, &want, sizeof want), 0);
}

TEST(GidQuery, QueryGidExOnEmptyIndexIsEnodata) {
  Device dev;
  ibv_port_attr pa{};
  ASSERT_EQ(ibv_query_port(dev.ctx, 1, &pa), 0);
  int empty = -1;
  for (int i = 0; i < pa.gid_tbl_len && empty < 0; ++i) {
    ibv_gid g;
    ASSERT_EQ(ibv_query_gid(dev.ctx, 1, i, &g), 0) << "index " << i;
    if (gid_is_zero(g)) empty = i;
  }
  ASSERT_GE(empty, 0) << "expected at least one empty slot in a " << pa.gid_tbl_len << "-entry table";
  ibv_gid_entry e{};
  EXPECT_EQ(ibv_query_gid_ex(dev.ctx, 1, static_cast<uint32_t>(empty), &e, 0), ENODATA);
  // Out of the table: not ENODATA, and not success either.
  EXPECT_NE(ibv_query_gid_ex(dev.ctx, 1, static_cast<uint32_t>(pa.gid_tbl_len), &e, 0), 0);
  // Port 2 does not exist.
  EXPECT_NE(ibv_query_gid_ex(dev.ctx, 2, 0, &e, 0), 0);
}

TEST(GidQuery, QueryGidTableReturnsTheNonEmptyEntries) {
  Device dev;
  ibv_port_attr pa{};
  ASSERT_EQ(ibv_query_port(dev.ctx, 1, &pa), 0);
  std::vector<int> non_empty;
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    ibv_gid g;
    ASSERT_EQ(ibv_query_gid(dev.ctx, 1, i, &g), 0);
    if (!gid_is_zero(g)) non_empty.push_back(i);
  }
  ASSERT_FALSE(non_empty.empty());
  std::vector<ibv_gid_entry> entries(pa.gid_tbl_len);
  ssize_t n = ibv_query_gid_table(dev.ctx, entries.data(), entries.size(), 0);
  ASSERT_EQ(n, static_cast<ssize_t>(non_empty.size()));
  bool saw_loopback = false;
  ibv_gid lo = loopback_gid();
  for (ssize_t k = 0; k < n; ++k) {
    const ibv_gid_entry& e = entries[k];
    SCOPED_TRACE(e.gid_index);
    EXPECT_EQ(e.port_num, 1u);
    EXPECT_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V2);
    EXPECT_FALSE(gid_is_zero(e.gid));
    EXPECT_EQ(e.gid_index, static_cast<uint32_t>(non_empty[k]));
    ibv_gid g;
    ASSERT_EQ(ibv_query_gid(dev.ctx, 1, static_cast<int>(e.gid_index), &g), 0);
    EXPECT_EQ(std::memcmp(&g, &e.gid, sizeof g), 0);
    if (std::memcmp(&e.gid, &lo, sizeof lo) == 0) saw_loopback = true;
  }
  EXPECT_TRUE(saw_loopback);
}

TEST(PkeyQuery, IndexZeroIsDefaultPkey) {
  Device dev;
  __be16 pkey = 0;
  ASSERT_EQ(ibv_query_pkey(dev.ctx, 1, 0, &pkey), 0);
  EXPECT_EQ(be16toh(pkey), 0xffff);
  ibv_port_attr pa{};
  ASSERT_EQ(ibv_query_port(dev.ctx, 1, &pa), 0);
  EXPECT_NE(ibv_query_pkey(dev.ctx, 1, pa.pkey_tbl_len, &pkey), 0) << "index past the table";
  EXPECT_NE(ibv_query_pkey(dev.ctx, 2, 0, &pkey), 0) << "port 2 does not exist";
}

TEST(PkeyQuery, GetPkeyIndex) {
  Device dev;
  EXPECT_EQ(ibv_get_pkey_index(dev.ctx, 1, htobe16(0xffff)), 0);
  EXPECT_LT(ibv_get_pkey_index(dev.ctx, 1, htobe16(0x1234)), 0) << "absent P_Key";
}

// ------------------------------------------------------------ strings and rates vs Debian

struct DebianVerbs {
  void* handle = nullptr;
  std::string error;
  const char* (*wc_status_str)(ibv_wc_status) = nullptr;
  const char* (*event_type_str)(ibv_event_type) = nullptr;
  const char* (*node_type_str)(ibv_node_type) = nullptr;
  const char* (*port_state_str)(ibv_port_state) = nullptr;
  int (*rate_to_mult)(ibv_rate) = nullptr;
  ibv_rate (*mult_to_rate)(int) = nullptr;
  int (*rate_to_mbps)(ibv_rate) = nullptr;
  ibv_rate (*mbps_to_rate)(int) = nullptr;

  DebianVerbs() {
    handle = dlmopen(LM_ID_NEWLM, "/usr/lib/x86_64-linux-gnu/libibverbs.so.1", RTLD_NOW);
    if (!handle) {
      const char* e = dlerror();
      error = e ? e : "dlmopen failed";
      return;
    }
    auto sym = [&](const char* name) { return dlsym(handle, name); };
    wc_status_str = reinterpret_cast<decltype(wc_status_str)>(sym("ibv_wc_status_str"));
    event_type_str = reinterpret_cast<decltype(event_type_str)>(sym("ibv_event_type_str"));
    node_type_str = reinterpret_cast<decltype(node_type_str)>(sym("ibv_node_type_str"));
    port_state_str = reinterpret_cast<decltype(port_state_str)>(sym("ibv_port_state_str"));
    rate_to_mult = reinterpret_cast<decltype(rate_to_mult)>(sym("ibv_rate_to_mult"));
    mult_to_rate = reinterpret_cast<decltype(mult_to_rate)>(sym("mult_to_ibv_rate"));
    rate_to_mbps = reinterpret_cast<decltype(rate_to_mbps)>(sym("ibv_rate_to_mbps"));
    mbps_to_rate = reinterpret_cast<decltype(mbps_to_rate)>(sym("mbps_to_ibv_rate"));
  }
  bool complete() const {
    return handle && wc_status_str && event_type_str && node_type_str && port_state_str && rate_to_mult &&
           mult_to_rate && rate_to_mbps && mbps_to_rate;
  }
};

DebianVerbs& debian() {
  static DebianVerbs d;  // kept loaded for the life of the process
  return d;
}

class VsDebian : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(debian().complete()) << "cannot load Debian's libibverbs: " << debian().error;
    // Sanity: the namespace really holds a different library than ours.
    ASSERT_NE(reinterpret_cast<void*>(debian().wc_status_str), reinterpret_cast<void*>(&ibv_wc_status_str));
  }
  DebianVerbs& d = debian();
};

TEST_F(VsDebian, WcStatusStr) {
  for (int v = -1; v <= IBV_WC_TM_RNDV_INCOMPLETE + 4; ++v) {
    auto s = static_cast<ibv_wc_status>(v);
    EXPECT_STREQ(ibv_wc_status_str(s), d.wc_status_str(s)) << "status " << v;
  }
}

TEST_F(VsDebian, EventTypeStr) {
  for (int v = -1; v <= IBV_EVENT_WQ_FATAL + 4; ++v) {
    auto e = static_cast<ibv_event_type>(v);
    EXPECT_STREQ(ibv_event_type_str(e), d.event_type_str(e)) << "event " << v;
  }
}

TEST_F(VsDebian, NodeTypeStr) {
  for (int v = -2; v <= IBV_NODE_UNSPECIFIED + 4; ++v) {
    auto t = static_cast<ibv_node_type>(v);
    EXPECT_STREQ(ibv_node_type_str(t), d.node_type_str(t)) << "node type " << v;
  }
}

TEST_F(VsDebian, PortStateStr) {
  for (int v = -1; v <= IBV_PORT_ACTIVE_DEFER + 4; ++v) {
    auto s = static_cast<ibv_port_state>(v);
    EXPECT_STREQ(ibv_port_state_str(s), d.port_state_str(s)) << "port state " << v;
  }
}

TEST_F(VsDebian, RateToMultAndMbps) {
  for (int v = -1; v <= IBV_RATE_1200_GBPS + 4; ++v) {
    auto r = static_cast<ibv_rate>(v);
    EXPECT_EQ(ibv_rate_to_mult(r), d.rate_to_mult(r)) << "rate " << v;
    EXPECT_EQ(ibv_rate_to_mbps(r), d.rate_to_mbps(r)) << "rate " << v;
  }
}

TEST_F(VsDebian, MultToRate) {
  int mismatches = 0;
  for (int m = -2; m <= 1000; ++m) {
    ibv_rate ours = mult_to_ibv_rate(m), theirs = d.mult_to_rate(m);
    if (ours != theirs && ++mismatches <= 10) ADD_FAILURE() << "mult " << m << ": " << ours << " vs Debian " << theirs;
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_F(VsDebian, MbpsToRate) {
  // Every value up to past the largest rate (1.2 Tb/s), so that a value one
  // library accepts and the other does not cannot hide.
  int mismatches = 0;
  for (int m = -1; m <= 1'300'000; ++m) {
    ibv_rate ours = mbps_to_ibv_rate(m), theirs = d.mbps_to_rate(m);
    if (ours != theirs && ++mismatches <= 30)
      ADD_FAILURE() << "mbps " << m << ": " << ours << " vs Debian " << theirs;
  }
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
