#include "transport/roce_roles.h"

namespace sv::roce {

const char* state_name(ResponderState s) {
  static constexpr const char* kNames[kResponderStates] = {
      "check_source", "check_psn", "sequence_nak", "duplicate",   "check_read", "read_reply", "atomic",
      "check_op_sequence", "place", "complete", "acknowledge", "nak", "done"};
  const int i = static_cast<int>(s);
  return i >= 0 && i < kResponderStates ? kNames[i] : "?";
}

const char* state_name(CompleterState s) {
  static constexpr const char* kNames[kCompleterStates] = {
      "check_source", "check_psn", "check_answer", "implicit_ack",  "sequence_nak",
      "ack",          "verdict_nak", "read_response", "read_gap", "atomic_ack", "done"};
  const int i = static_cast<int>(s);
  return i >= 0 && i < kCompleterStates ? kNames[i] : "?";
}

}  // namespace sv::roce
