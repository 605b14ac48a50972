// What the engine's receiving side makes of an arriving request packet, for
// the unreliable receiver (roce_receiver.cpp) and the RC responder
// (roce_responder.cpp) alike.
#pragma once

#include "core/message.h"
#include "net/roce_header.h"
#include "transport/roce_engine.h"

namespace sv::roce {

// Where the message came from, as the receiver's GRH will say.
Destination source_of(const PacketAddrs& from);
// The Message the NIC model executes for `pkt` (the last packet, or the
// only one), with `first` the packet that started it.
Message message_for(const net::RocePacket& first, const net::RocePacket& pkt, const TargetQp& t, const Destination& d);
// The addresses an answer to a packet from `from` goes with.
PacketAddrs reply_to(const PacketAddrs& from);
// Whether an opcode is of the QP's own transport.
bool opcode_fits(uint8_t opcode, uint32_t qp_type);

}  // namespace sv::roce
