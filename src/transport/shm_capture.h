// SOFTVERBS_PCAP for the intra-host path: a message the shared-memory
// transport carried, written to the process's capture file
// (roce_capture.h) as the RoCEv2 packets a NIC would have put on the wire,
// so one tshark view reads both paths.
//
// Who writes what: the initiator's process writes the whole exchange, the
// request packets and the answer it got (ACK, RNR NAK, NAK, READ response
// packets, ATOMIC ACKNOWLEDGE); the target's process writes nothing for it.
// Over shared memory the initiator runs the responder itself, so it is the
// one process that saw the exchange, and each message is in exactly one
// file. (Over the network each side writes what it sent and received, so
// an RC message shows in both files there.)
//
// What the packets look like: Ethernet/IP/UDP as build_frame() writes them
// (IPv4 when both GIDs are ::ffff:a.b.c.d, else IPv6; synthetic MACs; IP ID
// 0), UDP destination port 4791, source port as a kernel rxe picks it for
// the QP (udp_sport.h), the valid ICRC. SEND/WRITE are cut at the QP's path
// MTU into FIRST/MIDDLE/LAST with RETH, ImmDt, IETH, DETH or XRCETH where
// the opcode calls for them, AckReq on the last packet; PSNs count on from
// the QP's sq_psn (per QP, kept here: an RNR NAK or no answer leaves them
// where they were, so the retry shows the same PSNs, as on the wire); the
// responder's MSN counts the connection's acknowledged messages. Responses,
// XRC's too, use the RC opcodes, as the network engine sends them
// (roce_receiver.cpp). UC and UD get no answer. A multicast UD message is
// written once, to the group's address and QPN 0xFFFFFF.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "core/message.h"
#include "core/transport.h"
#include "net/roce_header.h"

namespace sv::roce {

// Writes `m` and the answer `r` the responder gave to the capture file.
// Called only when the capture is on (ShmTransport reads that once).
void capture_shm_exchange(const Message& m, Response r);
// QP `qpn` became ready to send with `p` (its PSNs start at p.sq_psn), or
// was reset or destroyed.
void capture_ready(uint32_t qpn, const SendParams& p);
void capture_forget(uint32_t qpn);

// One packet of an exchange, as it would travel.
struct ExchangePacket {
  bool response = false;  // sent by the responder
  in6_addr src{}, dst{};
  uint16_t src_port = 0;  // the destination port is 4791
  uint8_t traffic_class = 0;
  net::RocePacket pkt;
  const uint8_t* payload = nullptr;
  size_t len = 0;
};

// The packets of `m` answered with `r`, in wire order: the request from
// PSN `psn`, cut at `mtu` bytes, then the answer (reliable QPs only)
// carrying MSN `msn` (the responder's count after this message). What
// capture_shm_exchange() writes, given the QP's PSN state.
void exchange_packets(const Message& m, Response r, uint32_t psn, uint32_t msn, uint32_t mtu,
                      const std::function<void(const ExchangePacket&)>& out);

}  // namespace sv::roce
