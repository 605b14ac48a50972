// The UDP source port of RoCEv2 packets, as Linux picks it. The port is
// the only entropy ECMP switches see between two hosts, so each QP gets its
// own; matching Linux exactly keeps our flows on the paths a kernel rxe
// peer's would take. All ports are in 0xC000-0xFFFF
// (IB_ROCE_UDP_ENCAP_VALID_PORT_MIN..MAX).
#pragma once

#include <cstdint>

namespace sv::net {

inline constexpr uint16_t kRoceUdpPort = 4791;
inline constexpr uint16_t kRoceSportBase = 0xC000;

// include/rdma/ib_verbs.h rdma_calc_flow_label: a 20-bit flow label from
// the two QPNs, for a GRH that has none.
constexpr uint32_t rdma_calc_flow_label(uint32_t lqpn, uint32_t rqpn) {
  uint64_t v = uint64_t{lqpn} * rqpn;
  v ^= v >> 20;
  v ^= v >> 40;
  return static_cast<uint32_t>(v & 0xFFFFF);
}

// include/rdma/ib_verbs.h rdma_flow_label_to_udp_sport: folds the 20-bit
// label into 14 bits.
constexpr uint16_t rdma_flow_label_to_udp_sport(uint32_t fl) {
  uint32_t low = fl & 0x03FFF, high = fl & 0xFC000;
  low ^= high >> 14;
  return static_cast<uint16_t>(low | kRoceSportBase);
}

// RC and UC (rxe_qp.c, rdma_get_udp_sport): the path's flow label, or one
// computed from the QPNs when it is 0.
constexpr uint16_t rc_udp_sport(uint32_t flow_label, uint32_t lqpn, uint32_t rqpn) {
  if (flow_label == 0) flow_label = rdma_calc_flow_label(lqpn, rqpn);
  return rdma_flow_label_to_udp_sport(flow_label);
}

// Linux hash_32(val, bits) (include/linux/hash.h, GOLDEN_RATIO_32).
constexpr uint32_t hash_32(uint32_t val, unsigned bits) { return (val * 0x61C88647u) >> (32 - bits); }

// UD (rxe_qp.c): from the local QPN alone, since a UD QP has no one peer.
constexpr uint16_t ud_udp_sport(uint32_t qpn) {
  return static_cast<uint16_t>(kRoceSportBase + (hash_32(qpn, 14) & 0x3FFF));
}

// Ports observed from a kernel rxe (wire.md): RC QPN 0x11 <-> 0x11, UD QPN 0x12.
static_assert(rc_udp_sport(0, 0x11, 0x11) == 49441 && 49441 == 0xC121);
static_assert(ud_udp_sport(0x12) == 63494 && 63494 == 0xF806);

}  // namespace sv::net
