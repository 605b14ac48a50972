// Asking the host service for rings to another user's process
// (transport/roce_peer_channels.h, roce_udp_wire.cpp): a peer is asked for
// once, and asked again only after its rings closed, or after the service
// that was asked went away without making them. A datagram sent while no
// service runs asks nobody, and so uses up no ask: the service that comes
// back is asked (before, the pair went by UDP for good).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "hostd/datagram_route.h"
#include "net/roce_datagram.h"
#include "transport/roce_peer_channels.h"
#include "transport/roce_udp_wire.h"
#include "util/port_attestation.h"

namespace sv::roce {
namespace {

TEST(PeerChannels, APeerIsAskedForOnce) {
  PeerChannels channels;
  EXPECT_TRUE(channels.note_asked(3));
  EXPECT_FALSE(channels.note_asked(3));
  EXPECT_TRUE(channels.note_asked(4));  // (each peer for itself)
  EXPECT_FALSE(channels.note_asked(0));  // (slot 0 is nobody's)
}

TEST(PeerChannels, AsksOfAServiceThatWentAwayAreForgotten) {
  PeerChannels channels;
  ASSERT_TRUE(channels.note_asked(3));
  channels.forget_unanswered_asks();
  EXPECT_TRUE(channels.note_asked(3));
}

in6_addr v4_mapped(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  in6_addr x{};
  x.s6_addr[10] = x.s6_addr[11] = 0xff;
  x.s6_addr[12] = a;
  x.s6_addr[13] = b;
  x.s6_addr[14] = c;
  x.s6_addr[15] = d;
  return x;
}

// A wire that had a service (its attestation table is kept) and lost it.
TEST(UdpWireAsks, ADatagramSentWithoutAServiceAsksNobodyAndUsesNoAsk) {
  auto table = std::make_unique<PortAttestationTable>();
  UdpWire wire;
  wire.attestation.store(table.get());
  wire.own_slot.store(1);
  uint8_t frame[net::kDatagramHeadroom + 64] = {};
  uint8_t* bth = frame + net::kDatagramHeadroom;
  bth[hostd::kDestQpSlotByte] = 2;  // a QP of slot 2's process
  OutDatagram d;
  d.src = d.dst = v4_mapped(127, 0, 0, 1);  // this host
  d.dst_port = 4791;
  d.data = bth;
  d.len = 64;
  wire.send(&d, 1);  // (by UDP, on no socket here: lost, as on a wire)
  EXPECT_TRUE(wire.channels.note_asked(2)) << "the datagram used up the ask with no service to ask";
}

}  // namespace
}  // namespace sv::roce
