// The RoCEv2 responder's targets on a real host: this host's QPs, found in
// the shared registry (the slot in a QP number names its process, the low
// bits its QP table entry), executed by the NIC model's respond().
#pragma once

#include "transport/roce_targets.h"

namespace sv::roce {

class HostTargets final : public Targets {
 public:
  bool find(uint32_t qpn, TargetQp* out) override;
  Response respond(const TargetQp& t, const Message& m) override;
  Response place_write(const TargetQp& t, const Message& m, uint64_t offset, const uint8_t* data,
                       uint32_t len) override;
};

}  // namespace sv::roce
