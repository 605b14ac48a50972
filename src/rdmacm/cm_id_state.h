// The life of a CM id as a state machine: its states, their names, and the
// transitions the connection calls and message handlers make. Every change
// of an id's state goes through set_state, so one trace line per transition
// (SOFTVERBS_LOG=debug) tells an id's story in the order it happened.
//
// Header-only except set_state, so the tests can check the tables without
// reaching into librdmacm's hidden symbols.
#pragma once

namespace sv::rdmacm {

struct Id;

enum class IdState {
  kIdle,
  kAddrBound,
  kAddrResolved,
  kRouteResolved,
  kListening,
  kConnectSent,        // active: REQ sent, waiting for REP/REJ
  kResponseReceived,   // active without QP: REP seen, waiting for rdma_establish
  kRequestReceived,    // passive: REQ seen, waiting for accept/reject
  kAccepted,           // passive: REP sent, waiting for RTU
  kEstablished,
  kDisconnected,
  kFailed,             // keep last: kIdStateCount counts up to it
};

inline constexpr int kIdStateCount = static_cast<int>(IdState::kFailed) + 1;

// The name traces use ("?" for a value that is not a state). A switch
// without default, so -Wswitch names a new state that has no name yet.
constexpr const char* id_state_name(IdState s) {
  switch (s) {
    case IdState::kIdle: return "Idle";
    case IdState::kAddrBound: return "AddrBound";
    case IdState::kAddrResolved: return "AddrResolved";
    case IdState::kRouteResolved: return "RouteResolved";
    case IdState::kListening: return "Listening";
    case IdState::kConnectSent: return "ConnectSent";
    case IdState::kResponseReceived: return "ResponseReceived";
    case IdState::kRequestReceived: return "RequestReceived";
    case IdState::kAccepted: return "Accepted";
    case IdState::kEstablished: return "Established";
    case IdState::kDisconnected: return "Disconnected";
    case IdState::kFailed: return "Failed";
  }
  return "?";
}

// The transitions the code makes today (each with where it happens), as
// documentation and so a trace can point out one that is not listed. It is
// never enforced: a transition missing here is logged, not refused, so this
// table cannot change what an application sees.
constexpr bool id_transition_expected(IdState from, IdState to) {
  using S = IdState;
  switch (from) {
    case S::kIdle:  // rdma_bind_addr / resolve_addr / listen; a listener's new child
      return to == S::kAddrBound || to == S::kRequestReceived;
    case S::kAddrBound:  // rdma_resolve_addr, rdma_listen
      return to == S::kAddrResolved || to == S::kListening;
    case S::kAddrResolved:  // rdma_resolve_route
      return to == S::kRouteResolved;
    case S::kRouteResolved:  // rdma_connect
      return to == S::kConnectSent;
    case S::kListening:
      return false;
    case S::kConnectSent:  // REP (with or without QP), SIDR REP; REJ, timeout, unreachable
      return to == S::kResponseReceived || to == S::kEstablished || to == S::kFailed;
    case S::kResponseReceived:  // rdma_establish; DREQ, peer gone, rdma_disconnect
      return to == S::kEstablished || to == S::kDisconnected;
    case S::kRequestReceived:  // rdma_accept (RC: REP sent; UD: SIDR REP sent); reject, peer gone
      return to == S::kAccepted || to == S::kEstablished || to == S::kFailed;
    case S::kAccepted:  // RTU or rdma_notify; DREQ, rdma_disconnect; REJ, timeout, peer gone
      return to == S::kEstablished || to == S::kDisconnected || to == S::kFailed;
    case S::kEstablished:  // DREQ, peer gone, rdma_disconnect
      return to == S::kDisconnected;
    case S::kDisconnected:
    case S::kFailed:
      return false;
  }
  return false;
}

// Moves `id` to `to`; `why` says what made it (a message, a call, an error)
// for the trace line.
void set_state(Id* id, IdState to, const char* why);

}  // namespace sv::rdmacm
