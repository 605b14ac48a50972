// The states of the RC roles of the RoCEv2 engine, as Linux rxe has them:
// the responder (roce_responder.cpp; rxe_resp.c), which takes a request
// packet to its QP's verdict and answer, and the completer
// (roce_completer.cpp; rxe_comp.c), which takes an answer to the requester's
// work requests. Each role runs one function per state until kDone; with
// SOFTVERBS_LOG=debug every transition is logged with these names.
#pragma once

#include <cstdint>

#include "util/log.h"

namespace sv::roce {

enum class ResponderState : uint8_t {
  kCheckSource,      // from the QP's connected peer (address, host-service slot)?
  kCheckPsn,         // the expected PSN, a past one, or one after a gap?
  kSequenceNak,      // a gap: NAK the expected PSN, once per gap
  kDuplicate,        // a past SEND/WRITE/atomic: answered again, not executed again
  kCheckRead,        // a READ: a past one among the read resources? its range?
  kReadReply,        // READ responses, a packet at a time
  kAtomic,           // execute, keep the result for a replay, ATOMIC ACKNOWLEDGE
  kCheckOpSequence,  // SEND/WRITE: does the packet continue the message in progress?
  kPlace,            // a WRITE's payload into memory; a SEND's gathered
  kComplete,         // the message's last packet: the NIC model executes it whole
  kAcknowledge,      // ACK, RNR NAK or NAK, as the verdict says
  kNak,              // an error NAK for the packet, with nothing executed
  kDone,
};
inline constexpr int kResponderStates = static_cast<int>(ResponderState::kDone) + 1;

enum class CompleterState : uint8_t {
  kCheckSource,    // from the peer of the oldest message on the wire?
  kCheckPsn,       // about which message and packet? (none sent: dropped)
  kCheckAnswer,    // what kind of answer
  kImplicitAck,    // every SEND/WRITE before its message is acknowledged (IBTA 9.7.5.1.1)
  kSequenceNak,    // the responder expects an earlier packet: go back to it
  kAck,            // packets acknowledged: the window moves, a message may complete
  kVerdictNak,     // error NAK: the message ends with it; RNR NAK: everything goes again after its timer
  kReadResponse,   // a READ's data, in order
  kReadGap,        // a READ's response past the next one expected: asked again from the missing one
  kAtomicAck,      // an atomic's original value
  kDone,
};
inline constexpr int kCompleterStates = static_cast<int>(CompleterState::kDone) + 1;

const char* state_name(ResponderState s);
const char* state_name(CompleterState s);

// Runs a role for one packet: `step` from the first state until kDone, and
// with SOFTVERBS_LOG=trace one line per transition ("QP 0x20022 responder:
// PSN 0x66 RC_SEND_MIDDLE: check_psn -> sequence_nak"). Not at debug: a
// line per packet and state buried the debug log of an MPI job over RoCE
// (~100k lines in 10 s, forwarded through mpirun) and slowed its ranks.
template <typename State, typename Step>
void run_role(const char* role, uint32_t qpn, uint32_t psn, const char* opcode, Step&& step) {
  const bool trace = log_enabled(LogLevel::kTrace);
  for (State s{}; s != State::kDone;) {
    const State next = step(s);
    if (trace) SV_TRACE("QP %#x %s: PSN %#x %s: %s -> %s", qpn, role, psn, opcode, state_name(s), state_name(next));
    s = next;
  }
}

}  // namespace sv::roce
