// libFuzzer target: a RoCEv2 packet as the receiver takes it from a UDP
// socket (BTH, extension headers, payload, pad, ICRC), and the same bytes as
// a whole Ethernet frame (parse_frame). The receiver runs the ICRC check
// and decode() on whatever the network sends (transport/roce_transport.cpp
// handle_datagram); neither may read outside the bytes it was given, and
// what decode() accepts must describe the packet exactly: encoding it
// again and decoding that gives the same fields.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "net/roce_datagram.h"
#include "net/roce_frame.h"
#include "net/roce_header.h"
#include "net/roce_opcode.h"
#include "roce_fuzz_addrs.h"

namespace {

using namespace sv::net;

// The trap an invariant's failure springs: a crash libFuzzer reports.
void check(bool ok) {
  if (!ok) std::abort();
}

// decode(), then the invariants of what it accepted.
void decode_datagram(const uint8_t* at, size_t len) {
  if (len < kIcrcBytes) return;
  RocePacket p;
  if (!decode(at, len - kIcrcBytes, &p)) return;
  const OpcodeInfo* op = opcode_info(p.bth.opcode);
  check(op != nullptr && p.bth.tver == 0);
  check(p.payload == at + op->header_bytes);
  check(op->header_bytes + p.payload_len + p.bth.pad == len - kIcrcBytes);
  check(op->is(kPayload) || p.payload_len == 0);
  // The fields survive encoding: reserved bits aside, the headers are the
  // packet's.
  std::vector<uint8_t> again(op->header_bytes + p.payload_len + p.bth.pad);
  check(encode_headers(p, again.data()) == op->header_bytes);
  std::memcpy(again.data() + op->header_bytes, p.payload, p.payload_len + p.bth.pad);
  RocePacket q;
  check(decode(again.data(), again.size(), &q));
  check(q.bth == p.bth && q.xrceth == p.xrceth && q.deth == p.deth && q.reth == p.reth && q.aeth == p.aeth &&
        q.atomic_eth == p.atomic_eth && q.atomic_ack == p.atomic_ack && q.imm == p.imm && q.ieth == p.ieth &&
        q.payload_len == p.payload_len);
  // What the requester and responder read off an AETH.
  (void)aeth_credits(p.aeth.syndrome);
  (void)rnr_timer_usec(p.aeth.syndrome);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;  // the receiver's largest slot
  // A datagram sits kDatagramHeadroom into its buffer, as the receiver's
  // slots hold it: the ICRC check writes the IP/UDP image there. The
  // buffer is exactly that long, so reading past the end is caught.
  std::vector<uint8_t> buf(kDatagramHeadroom + size);
  std::memcpy(buf.data() + kDatagramHeadroom, data, size);
  for (bool v4 : {true, false}) (void)datagram_icrc_ok(fuzz::roce_fuzz_addrs(v4), buf.data(), size);
  check(std::memcmp(buf.data() + kDatagramHeadroom, data, size) == 0);  // the check wrote only the headroom
  decode_datagram(buf.data() + kDatagramHeadroom, size);

  ParsedFrame frame;
  if (parse_frame(data, size, &frame)) {
    check(frame.error == FrameError::kNone);
    check(frame.packet.payload >= data && frame.packet.payload + frame.packet.payload_len <= data + size);
  }
  return 0;
}
