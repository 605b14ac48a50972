// The transport interface: how a message reaches the responder QP.
//
// The verbs layer and the NIC model (requester, responder, completions,
// errors, retries) are the same for every transport; a transport only moves
// the message and brings back the responder's answer:
//  * shared memory (transport/shm_transport.*): the initiator runs the
//    responder itself, on the target's queues mapped from its arena;
//  * RoCEv2/UDP (transport/roce_transport.*): packets, PSNs, ACKs and
//    retransmission; the target's transport runs the same responder on
//    arrival, and RC answers come back later (Outcome::kPending).
#pragma once

#include <atomic>
#include <cstdint>

#include "core/message.h"

namespace sv {

// What a transport needs of a requester QP's attributes (ibv_modify_qp).
struct SendParams {
  uint32_t sq_psn = 0;  // where its PSNs start
  ibv_mtu path_mtu = IBV_MTU_1024;
  uint8_t timeout = 0;    // the ACK timeout's exponent (0: no limit)
  uint8_t retry_cnt = 7;  // retransmissions before the QP gives up
  uint8_t rnr_retry = 7;  // RNR NAKs waited out before it gives up (7: forever)
};

// Where a transport that answers later (Transport::answers_later) sends a
// QP's answers: the QP's requester (core/requester.h), handed over with the
// QP's SendParams when it becomes ready to send. `token` is the Message's.
class SendAnswers {
 public:
  virtual void answered(uint64_t token, Response r) = 0;

 protected:
  ~SendAnswers() = default;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // Delivers `m` to (m.dst.dgid, m.dst.qpn). A synchronous transport returns
  // the responder's answer; an asynchronous one will report it through the
  // requester's completion path instead (docs/ARCHITECTURE.md).
  virtual Response deliver(const Message& m) = 0;
  // Whether this transport answers RC messages later (deliver() returns
  // kPending and answer_from_network() follows), reading the payload as its
  // packets go: the requester then hands it pinned memory and pipelines.
  virtual bool answers_later() const { return false; }

  // A QP may now receive from this transport (it reached RTR).
  virtual void listen() {}
  // QP `qpn` may send through this transport (it reached RTS, or changed
  // attributes there), with these parameters; a transport that answers
  // later answers it through `answers` until forget_qp().
  virtual void ready_to_send(uint32_t /*qpn*/, const SendParams& /*p*/, SendAnswers& /*answers*/) {}
  // The QP is being reset (wait: false) or destroyed (wait: true, returns
  // once no answer for it is being delivered): drop what is kept for it.
  virtual void forget_qp(uint32_t /*qpn*/, bool /*wait*/) {}
  // The QP's send queue was flushed: messages of it still on the wire are
  // not sent again (the application owns their buffers again).
  virtual void drop_sends(uint32_t /*qpn*/) {}
  // Registered memory is going (ibv_dereg_mr, ibv_rereg_mr): what the
  // transport still reads from application buffers it copies now.
  virtual void copy_app_buffers() {}
  // Does the network work that is waiting (packets received, answers owed)
  // on the calling thread, if no other thread is doing it right now.
  virtual void progress() {}
};

// Set once the network transport carried a packet. From then on a poll of an
// empty CQ first calls progress(): an application that busy-polls its CQ on
// every core would otherwise wait for the network thread to be scheduled (a
// whole scheduler tick on a small machine), as a NIC never makes it wait.
extern std::atomic<bool> g_network_in_use;

// Work requests of one QP an asynchronous transport holds at once: the
// requester hands them over in order (requester.cpp) and the answers come
// back in order.
inline constexpr uint64_t kMaxPendingPerQp = 32;

}  // namespace sv
