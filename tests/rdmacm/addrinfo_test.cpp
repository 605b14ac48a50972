// rdma_getaddrinfo / rdma_freeaddrinfo through the public API, checked
// against rdma-core 44's behaviour without ibacm. Only loopback, numeric and
// /etc/hosts names are used, so no test depends on DNS.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <infiniband/ib.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include <endian.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace {

struct AddrinfoFree {
  void operator()(rdma_addrinfo* rai) const noexcept { rdma_freeaddrinfo(rai); }
};
using AddrinfoPtr = std::unique_ptr<rdma_addrinfo, AddrinfoFree>;

// One call's outcome: the return value, errno after it, and the result.
struct Resolution {
  int ret = 0;
  int err = 0;
  AddrinfoPtr info;
};

Resolution resolve(const char* node, const char* service, const rdma_addrinfo* hints) {
  rdma_addrinfo* res = nullptr;
  errno = 0;
  Resolution r;
  r.ret = rdma_getaddrinfo(node, service, hints, &res);
  r.err = errno;
  r.info.reset(res);
  return r;
}

const sockaddr_in& as_in(const sockaddr* addr) { return *reinterpret_cast<const sockaddr_in*>(addr); }
const sockaddr_in6& as_in6(const sockaddr* addr) {
  return *reinterpret_cast<const sockaddr_in6*>(addr);
}

std::string ipv4_text(const sockaddr* addr) {
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &as_in(addr).sin_addr, text, sizeof(text));
  return text;
}

std::string ipv6_text(const sockaddr* addr) {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, &as_in6(addr).sin6_addr, text, sizeof(text));
  return text;
}

uint16_t port_of(const sockaddr* addr) {
  return addr->sa_family == AF_INET6 ? ntohs(as_in6(addr).sin6_port) : ntohs(as_in(addr).sin_port);
}

// An active result with only a destination, as rdma-core without ibacm
// gives: no source, route, connect data or canonical names, one node.
void expect_plain_active(const rdma_addrinfo& rai) {
  EXPECT_EQ(rai.ai_flags, 0);
  EXPECT_NE(rai.ai_dst_addr, nullptr);
  EXPECT_EQ(rai.ai_src_addr, nullptr);
  EXPECT_EQ(rai.ai_src_len, 0u);
  EXPECT_EQ(rai.ai_route, nullptr);
  EXPECT_EQ(rai.ai_route_len, 0u);
  EXPECT_EQ(rai.ai_connect, nullptr);
  EXPECT_EQ(rai.ai_connect_len, 0u);
  EXPECT_EQ(rai.ai_src_canonname, nullptr);
  EXPECT_EQ(rai.ai_dst_canonname, nullptr);
  EXPECT_EQ(rai.ai_next, nullptr);
}

TEST(Addrinfo, NumericIpv4WithoutHintsIsReliableConnectedTcp) {
  Resolution r = resolve("127.0.0.1", "7471", nullptr);
  ASSERT_EQ(r.ret, 0) << gai_strerror(r.err);
  const rdma_addrinfo& rai = *r.info;
  expect_plain_active(rai);
  EXPECT_EQ(rai.ai_family, AF_INET);
  EXPECT_EQ(rai.ai_qp_type, IBV_QPT_RC);
  EXPECT_EQ(rai.ai_port_space, RDMA_PS_TCP);
  ASSERT_EQ(rai.ai_dst_len, sizeof(sockaddr_in));
  EXPECT_EQ(rai.ai_dst_addr->sa_family, AF_INET);
  EXPECT_EQ(ipv4_text(rai.ai_dst_addr), "127.0.0.1");
  EXPECT_EQ(port_of(rai.ai_dst_addr), 7471);
}

TEST(Addrinfo, NumericIpv6) {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_NUMERICHOST;
  hints.ai_port_space = RDMA_PS_TCP;
  Resolution r = resolve("::1", "18515", &hints);
  ASSERT_EQ(r.ret, 0) << gai_strerror(r.err);
  const rdma_addrinfo& rai = *r.info;
  expect_plain_active(rai);
  EXPECT_EQ(rai.ai_family, AF_INET6);
  EXPECT_EQ(rai.ai_qp_type, IBV_QPT_RC);
  EXPECT_EQ(rai.ai_port_space, RDMA_PS_TCP);
  ASSERT_EQ(rai.ai_dst_len, sizeof(sockaddr_in6));
  EXPECT_EQ(ipv6_text(rai.ai_dst_addr), "::1");
  EXPECT_EQ(port_of(rai.ai_dst_addr), 18515);
}

TEST(Addrinfo, FamilyHintRestrictsTheAnswer) {
  rdma_addrinfo hints{};
  hints.ai_family = AF_INET6;
  EXPECT_NE(resolve("127.0.0.1", "7471", &hints).ret, 0);

  hints.ai_family = AF_INET;
  Resolution r = resolve("127.0.0.1", "7471", &hints);
  ASSERT_EQ(r.ret, 0) << gai_strerror(r.err);
  EXPECT_EQ(r.info->ai_family, AF_INET);
}

TEST(Addrinfo, LocalhostNameResolvesToLoopback) {
  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_TCP;
  Resolution r = resolve("localhost", "7471", &hints);
  ASSERT_EQ(r.ret, 0) << gai_strerror(r.err);
  const rdma_addrinfo& rai = *r.info;
  expect_plain_active(rai);
  ASSERT_NE(rai.ai_dst_addr, nullptr);
  EXPECT_EQ(rai.ai_family, rai.ai_dst_addr->sa_family);
  if (rai.ai_family == AF_INET) {
    EXPECT_EQ(ipv4_text(rai.ai_dst_addr), "127.0.0.1");
  } else {
    ASSERT_EQ(rai.ai_family, AF_INET6);
    EXPECT_EQ(ipv6_text(rai.ai_dst_addr), "::1");
  }
  EXPECT_EQ(port_of(rai.ai_dst_addr), 7471);
}

TEST(Addrinfo, PassiveWithoutNodeGivesTheWildcardSource) {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_family = AF_INET;
  hints.ai_port_space = RDMA_PS_TCP;
  Resolution r = resolve(nullptr, "7471", &hints);
  ASSERT_EQ(r.ret, 0) << gai_strerror(r.err);
  const rdma_addrinfo& rai = *r.info;
  EXPECT_EQ(rai.ai_flags, RAI_PASSIVE);
  EXPECT_EQ(rai.ai_family, AF_INET);
  EXPECT_EQ(rai.ai_qp_type, IBV_QPT_RC);
  EXPECT_EQ(rai.ai_dst_addr, nullptr);
  EXPECT_EQ(rai.ai_dst_len, 0u);
  ASSERT_EQ(rai.ai_src_len, sizeof(sockaddr_in));
  EXPECT_EQ(ipv4_text(rai.ai_src_addr), "0.0.0.0");
  EXPECT_EQ(port_of(rai.ai_src_addr), 7471);
  EXPECT_EQ(rai.ai_next, nullptr);
}

TEST(Addrinfo, PassiveWithoutFamilyGivesSomeWildcard) {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_PASSIVE;
  Resolution r = resolve(nullptr, "7471", &hints);
  ASSERT_EQ(r.ret, 0) << gai_strerror(r.err);
  const rdma_addrinfo& rai = *r.info;
  ASSERT_NE(rai.ai_src_addr, nullptr);
  EXPECT_EQ(rai.ai_family, rai.ai_src_addr->sa_family);
  if (rai.ai_family == AF_INET) {
    EXPECT_EQ(ipv4_text(rai.ai_src_addr), "0.0.0.0");
  } else {
    ASSERT_EQ(rai.ai_family, AF_INET6);
    EXPECT_EQ(ipv6_text(rai.ai_src_addr), "::");
  }
}

TEST(Addrinfo, PassiveWithNodeBindsThatAddress) {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_PASSIVE | RAI_NUMERICHOST;
  Resolution r = resolve("127.0.0.1", "7471", &hints);
  ASSERT_EQ(r.ret, 0) << gai_strerror(r.err);
  EXPECT_EQ(r.info->ai_flags, RAI_PASSIVE);  // other flags are not echoed
  ASSERT_NE(r.info->ai_src_addr, nullptr);
  EXPECT_EQ(ipv4_text(r.info->ai_src_addr), "127.0.0.1");
  EXPECT_EQ(r.info->ai_dst_addr, nullptr);
}

TEST(Addrinfo, ServiceAloneResolvesActiveToLoopback) {
  // getaddrinfo's rule for a NULL node without AI_PASSIVE.
  Resolution r = resolve(nullptr, "7471", nullptr);
  ASSERT_EQ(r.ret, 0) << gai_strerror(r.err);
  ASSERT_NE(r.info->ai_dst_addr, nullptr);
  EXPECT_EQ(port_of(r.info->ai_dst_addr), 7471);
}

TEST(Addrinfo, NamedServiceIsLookedUp) {
  // "discard" is 9/tcp and 9/udp in every /etc/services.
  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_TCP;
  Resolution r = resolve("127.0.0.1", "discard", &hints);
  if (r.ret != 0) GTEST_SKIP() << "no services database: " << gai_strerror(r.err);
  EXPECT_EQ(port_of(r.info->ai_dst_addr), 9);
}

TEST(Addrinfo, NodeAloneHasPortZero) {
  Resolution r = resolve("127.0.0.1", nullptr, nullptr);
  ASSERT_EQ(r.ret, 0) << gai_strerror(r.err);
  EXPECT_EQ(port_of(r.info->ai_dst_addr), 0);
}

TEST(Addrinfo, UdpPortSpaceIsUnreliableDatagram) {
  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_UDP;
  Resolution r = resolve("127.0.0.1", "7471", &hints);
  ASSERT_EQ(r.ret, 0) << gai_strerror(r.err);
  EXPECT_EQ(r.info->ai_qp_type, IBV_QPT_UD);
  EXPECT_EQ(r.info->ai_port_space, RDMA_PS_UDP);
}

TEST(Addrinfo, UdQpTypeIsUdpPortSpace) {
  rdma_addrinfo hints{};
  hints.ai_qp_type = IBV_QPT_UD;
  Resolution r = resolve("127.0.0.1", "7471", &hints);
  ASSERT_EQ(r.ret, 0) << gai_strerror(r.err);
  EXPECT_EQ(r.info->ai_qp_type, IBV_QPT_UD);
  EXPECT_EQ(r.info->ai_port_space, RDMA_PS_UDP);
}

TEST(Addrinfo, IpoibAndIbPortSpacesAreKept) {
  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_IPOIB;
  Resolution ipoib = resolve("127.0.0.1", "7471", &hints);
  ASSERT_EQ(ipoib.ret, 0) << gai_strerror(ipoib.err);
  EXPECT_EQ(ipoib.info->ai_port_space, RDMA_PS_IPOIB);
  EXPECT_EQ(ipoib.info->ai_qp_type, IBV_QPT_UD);

  // The IB port space carries both QP types: the QP type decides.
  hints.ai_port_space = RDMA_PS_IB;
  hints.ai_qp_type = IBV_QPT_UD;
  Resolution ib = resolve("127.0.0.1", "7471", &hints);
  ASSERT_EQ(ib.ret, 0) << gai_strerror(ib.err);
  EXPECT_EQ(ib.info->ai_port_space, RDMA_PS_IB);
  EXPECT_EQ(ib.info->ai_qp_type, IBV_QPT_UD);
}

TEST(Addrinfo, NumericHostRefusesAHostName) {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_NUMERICHOST;
  Resolution r = resolve("localhost", "7471", &hints);
  EXPECT_EQ(r.ret, -1);
  // rdma-core leaves the resolver's EAI_* code in errno.
  EXPECT_EQ(r.err, EAI_NONAME);
  EXPECT_EQ(r.info, nullptr);
}

TEST(Addrinfo, UnknownFamilyFails) {
  rdma_addrinfo hints{};
  hints.ai_family = 12345;
  Resolution r = resolve("127.0.0.1", "7471", &hints);
  EXPECT_EQ(r.ret, -1);
  EXPECT_EQ(r.err, EAI_FAMILY);
}

TEST(Addrinfo, InconsistentQpTypeAndPortSpaceFail) {
  rdma_addrinfo hints{};
  hints.ai_qp_type = IBV_QPT_UD;
  hints.ai_port_space = RDMA_PS_TCP;
  Resolution r = resolve("127.0.0.1", "7471", &hints);
  EXPECT_EQ(r.ret, -1);
  EXPECT_LT(r.err, 0) << "an EAI_* code";
}

TEST(Addrinfo, NothingToResolveIsInvalid) {
  Resolution r = resolve(nullptr, nullptr, nullptr);
  EXPECT_EQ(r.ret, -1);
  EXPECT_EQ(r.err, EINVAL);
}

TEST(Addrinfo, MissingResultPointerIsInvalid) {
  errno = 0;
  EXPECT_EQ(rdma_getaddrinfo("127.0.0.1", "7471", nullptr, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST(Addrinfo, HintAddressWithoutPointerIsInvalid) {
  rdma_addrinfo hints{};
  hints.ai_src_len = sizeof(sockaddr_in);
  Resolution r = resolve("127.0.0.1", "7471", &hints);
  EXPECT_EQ(r.ret, -1);
  EXPECT_EQ(r.err, EINVAL);
}

TEST(Addrinfo, ActiveSourceComesFromTheHints) {
  sockaddr_in src{};
  src.sin_family = AF_INET;
  src.sin_port = htons(5000);
  inet_pton(AF_INET, "127.0.0.2", &src.sin_addr);
  rdma_addrinfo hints{};
  hints.ai_src_addr = reinterpret_cast<sockaddr*>(&src);
  hints.ai_src_len = sizeof(src);

  Resolution r = resolve("127.0.0.1", "7471", &hints);
  ASSERT_EQ(r.ret, 0) << gai_strerror(r.err);
  const rdma_addrinfo& rai = *r.info;
  ASSERT_EQ(rai.ai_src_len, sizeof(src));
  ASSERT_NE(rai.ai_src_addr, nullptr);
  EXPECT_NE(rai.ai_src_addr, hints.ai_src_addr) << "the result owns a copy";
  EXPECT_EQ(std::memcmp(rai.ai_src_addr, &src, sizeof(src)), 0);
  EXPECT_EQ(ipv4_text(rai.ai_dst_addr), "127.0.0.1");
}

TEST(Addrinfo, NoRouteChangesNothingWithoutIbacm) {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_NOROUTE;
  Resolution r = resolve("127.0.0.1", "7471", &hints);
  ASSERT_EQ(r.ret, 0) << gai_strerror(r.err);
  expect_plain_active(*r.info);
}

TEST(Addrinfo, HintsAloneAreTheAnswer) {
  sockaddr_in6 dst{};
  dst.sin6_family = AF_INET6;
  dst.sin6_port = htons(7471);
  dst.sin6_addr = in6addr_loopback;
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_NOROUTE | RAI_FAMILY;
  hints.ai_family = AF_INET6;
  hints.ai_qp_type = IBV_QPT_RC;
  hints.ai_port_space = RDMA_PS_TCP;
  hints.ai_dst_addr = reinterpret_cast<sockaddr*>(&dst);
  hints.ai_dst_len = sizeof(dst);

  Resolution r = resolve(nullptr, nullptr, &hints);
  ASSERT_EQ(r.ret, 0) << gai_strerror(r.err);
  const rdma_addrinfo& rai = *r.info;
  EXPECT_EQ(rai.ai_flags, RAI_NOROUTE | RAI_FAMILY);
  EXPECT_EQ(rai.ai_family, AF_INET6);
  EXPECT_EQ(rai.ai_qp_type, IBV_QPT_RC);
  EXPECT_EQ(rai.ai_port_space, RDMA_PS_TCP);
  ASSERT_EQ(rai.ai_dst_len, sizeof(dst));
  EXPECT_NE(rai.ai_dst_addr, hints.ai_dst_addr);
  EXPECT_EQ(std::memcmp(rai.ai_dst_addr, &dst, sizeof(dst)), 0);
  EXPECT_EQ(rai.ai_src_addr, nullptr);
}

TEST(Addrinfo, IbFamilyWithNumericHostGivesAnIbAddress) {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_FAMILY | RAI_NUMERICHOST;
  hints.ai_family = AF_IB;
  hints.ai_port_space = RDMA_PS_TCP;
  Resolution r = resolve("fe80::2", "7471", &hints);
  ASSERT_EQ(r.ret, 0) << gai_strerror(r.err);
  const rdma_addrinfo& rai = *r.info;
  EXPECT_EQ(rai.ai_family, AF_IB);
  ASSERT_EQ(rai.ai_dst_len, sizeof(sockaddr_ib));
  const auto& ib = *reinterpret_cast<const sockaddr_ib*>(rai.ai_dst_addr);
  EXPECT_EQ(ib.sib_family, AF_IB);
  EXPECT_EQ(be16toh(ib.sib_pkey), 0xffff);
  in6_addr expected{};
  inet_pton(AF_INET6, "fe80::2", &expected);
  EXPECT_EQ(std::memcmp(&ib.sib_addr, &expected, sizeof(expected)), 0);
  EXPECT_EQ(be64toh(ib.sib_sid), RDMA_IB_IP_PS_TCP + 7471);
  EXPECT_EQ(be64toh(ib.sib_sid_mask), RDMA_IB_IP_PS_MASK | RDMA_IB_IP_PORT_MASK);
}

TEST(Addrinfo, IbFamilyNeedsAnIpv6StyleAddress) {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_FAMILY | RAI_NUMERICHOST;
  hints.ai_family = AF_IB;
  Resolution r = resolve("127.0.0.1", "7471", &hints);
  EXPECT_EQ(r.ret, -1);
  EXPECT_LT(r.err, 0) << "an EAI_* code";
}

TEST(Addrinfo, IbFamilyAloneResolvesAsIp) {
  // Without RAI_FAMILY and RAI_NUMERICHOST, rdma-core resolves AF_IB as
  // AF_UNSPEC and (without ibacm) answers with the IP address.
  rdma_addrinfo hints{};
  hints.ai_family = AF_IB;
  Resolution r = resolve("127.0.0.1", "7471", &hints);
  ASSERT_EQ(r.ret, 0) << gai_strerror(r.err);
  EXPECT_EQ(r.info->ai_family, AF_INET);
}

TEST(Addrinfo, FreeNullDoesNothing) { rdma_freeaddrinfo(nullptr); }

TEST(Addrinfo, FreeReleasesEveryMemberOfEveryNode) {
  // Leaks are what AddressSanitizer reports for this test.
  Resolution r = resolve("127.0.0.1", "7471", nullptr);
  ASSERT_EQ(r.ret, 0) << gai_strerror(r.err);
  rdma_addrinfo* first = r.info.release();
  first->ai_src_canonname = strdup("source");
  first->ai_dst_canonname = strdup("destination");
  first->ai_route = std::malloc(64);
  first->ai_route_len = 64;
  first->ai_connect = std::malloc(32);
  first->ai_connect_len = 32;
  first->ai_next = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
  first->ai_next->ai_dst_addr = static_cast<sockaddr*>(std::calloc(1, sizeof(sockaddr_in)));
  rdma_freeaddrinfo(first);
}

}  // namespace
