// The life of a CM id as a state machine: its states, their names, and the
// transitions the connection calls and message handlers make. Every change
// of an id's state goes through set_state, so one trace line per transition
// (SOFTVERBS_LOG=debug) tells an id's story in the order it happened.
//
// Header-only except set_state, so the tests can check the tables without
// reaching into librdmacm's hidden symbols.
#pragma once

namespace softverbs::rdmacm {

struct Id;

enum class IdState {
  Idle,
  AddrBound,
  AddrResolved,
  RouteResolved,
  Listening,
  ConnectSent,        // active: REQ sent, waiting for REP/REJ
  ResponseReceived,   // active without QP: REP seen, waiting for rdma_establish
  RequestReceived,    // passive: REQ seen, waiting for accept/reject
  Accepted,           // passive: REP sent, waiting for RTU
  Established,
  Disconnected,
  Failed,             // keep last: kIdStateCount counts up to it
};

inline constexpr int kIdStateCount = static_cast<int>(IdState::Failed) + 1;

// The name traces use ("?" for a value that is not a state). A switch
// without default, so -Wswitch names a new state that has no name yet.
constexpr const char* id_state_name(IdState s) {
  switch (s) {
    case IdState::Idle: return "Idle";
    case IdState::AddrBound: return "AddrBound";
    case IdState::AddrResolved: return "AddrResolved";
    case IdState::RouteResolved: return "RouteResolved";
    case IdState::Listening: return "Listening";
    case IdState::ConnectSent: return "ConnectSent";
    case IdState::ResponseReceived: return "ResponseReceived";
    case IdState::RequestReceived: return "RequestReceived";
    case IdState::Accepted: return "Accepted";
    case IdState::Established: return "Established";
    case IdState::Disconnected: return "Disconnected";
    case IdState::Failed: return "Failed";
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
    case S::Idle:  // rdma_bind_addr / resolve_addr / listen; a listener's new child
      return to == S::AddrBound || to == S::RequestReceived;
    case S::AddrBound:  // rdma_resolve_addr, rdma_listen
      return to == S::AddrResolved || to == S::Listening;
    case S::AddrResolved:  // rdma_resolve_route
      return to == S::RouteResolved;
    case S::RouteResolved:  // rdma_connect
      return to == S::ConnectSent;
    case S::Listening:
      return false;
    case S::ConnectSent:  // REP (with or without QP), SIDR REP; REJ, timeout, unreachable
      return to == S::ResponseReceived || to == S::Established || to == S::Failed;
    case S::ResponseReceived:  // rdma_establish; DREQ, peer gone, rdma_disconnect
      return to == S::Established || to == S::Disconnected;
    case S::RequestReceived:  // rdma_accept (RC: REP sent; UD: SIDR REP sent); reject, peer gone
      return to == S::Accepted || to == S::Established || to == S::Failed;
    case S::Accepted:  // RTU or rdma_notify; DREQ, rdma_disconnect; REJ, timeout, peer gone
      return to == S::Established || to == S::Disconnected || to == S::Failed;
    case S::Established:  // DREQ, peer gone, rdma_disconnect
      return to == S::Disconnected;
    case S::Disconnected:
    case S::Failed:
      return false;
  }
  return false;
}

// Moves `id` to `to`; `why` says what made it (a message, a call, an error)
// for the trace line.
void set_state(Id* id, IdState to, const char* why);

}  // namespace softverbs::rdmacm
