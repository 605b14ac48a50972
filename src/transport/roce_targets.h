// The responder's side of the NIC model, as the RoCEv2 engine's responder
// (roce_receiver.cpp) sees it: the QPs it answers for, found by number, and
// the model's respond() that executes a message on them. This host's QPs,
// in the shared registry, are one set of targets (roce_host_targets.cpp); a
// test's fake memory and receive queues another.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "core/message.h"

namespace sv::roce {

// What the responder needs to know of a QP it answers for, as its owner
// last set it (ibv_modify_qp).
struct TargetQp {
  uint32_t qpn = 0;
  uint32_t type = 0;      // ibv_qp_type
  uint32_t dest_qpn = 0;  // connected QPs: the peer
  ibv_gid dgid{};         // connected QPs: the peer's address
  uint32_t path_mtu = 0;  // bytes
  uint32_t max_dest_rd_atomic = 0;
  uint32_t rq_psn = 0;    // the first PSN expected
  // For the Targets that found it.
  const void* owner = nullptr;
  void* state = nullptr;
};

class Targets {
 public:
  virtual ~Targets() = default;
  // The QP `qpn` of this end, if there is one.
  virtual bool find(uint32_t qpn, TargetQp* out) = 0;
  // Executes a whole message (core/responder.h respond()).
  virtual Response respond(const TargetQp& t, const Message& m) = 0;
  // Places `len` bytes of a WRITE at `offset` into its range, as its
  // packets arrive (core/responder.h place_write_packet()).
  virtual Response place_write(const TargetQp& t, const Message& m, uint64_t offset, const uint8_t* data,
                               uint32_t len) = 0;
};

}  // namespace sv::roce
