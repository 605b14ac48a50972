// The network transport: RoCEv2 over UDP port 4791 (docs/ARCHITECTURE.md,
// "The network transport"). One per process, shared by its contexts. UD and
// UC messages leave at once; an RC message is answered later, by the
// network thread, through the requester (Outcome::kPending).
#pragma once

#include "core/transport.h"
#include "util/private_heap.h"

namespace sv {

namespace roce {
struct Nic;
}

class RoceTransport final : public Transport, public PrivateHeapObject {
 public:
  // A process starts one (verbs/device_list.cpp process_network(): it has
  // one UDP port and one registry slot), shared by its contexts. The engine
  // inside is an object like any other (roce_engine.h): tests run several
  // in one process.
  RoceTransport();
  const char* name() const override { return "roce"; }
  Response deliver(const Message& m) override;
  bool answers_later() const override { return true; }
  void listen() override;
  void ready_to_send(uint32_t qpn, const SendParams& p, SendAnswers& answers) override;
  void forget_qp(uint32_t qpn, bool wait) override;
  void drop_sends(uint32_t qpn) override;
  void copy_app_buffers() override;
  void progress() override;

 private:
  roce::Nic& nic_;
};

}  // namespace sv
