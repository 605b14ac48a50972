// The timeline (SOFTVERBS_TRACE=FILE): what the verbs did, as Chrome
// trace-event JSON (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU),
// which Perfetto's web UI and chrome://tracing open. Each process writes
// FILE.<pid>.json. One track per QP ("QP 0x10003 RC"): each send work
// request from its post to its completion (opcode, bytes, wr_id, status;
// an unsignaled one to when it was executed), each receive completion as
// it is polled (ibv_poll_cq), QP state changes, injected faults, and what
// the RoCEv2 engine did for the QP between hosts (retransmissions, ACK
// timeouts, loss probes, NAKs sent and received, duplicates) as instant
// events on it; its packets sent and received as a counter track, sampled
// at most once a millisecond.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

namespace sv {
struct Qp;
}

namespace sv::trace {

// SOFTVERBS_TRACE set (read when the device list is first taken): the
// hooks below cost a load and a branch while it is not.
extern bool g_on;
void load();

// A send work request at send queue position `pos` was posted now.
void posted(Qp* qp, uint64_t pos);
// ... and is done: executed (unsignaled) or completed with `status`.
void done(Qp* qp, uint64_t pos, uint64_t wr_id, ibv_wr_opcode op, uint64_t bytes, ibv_wc_status status);
// The QP moved to `state`.
void state(Qp* qp, ibv_qp_state state);
// Something happened to the QP (or the process, qp null): an instant
// event named `what`, with `detail`.
void instant(const Qp* qp, const char* what, const char* detail);
// The same on the track of QP `qpn`, which the caller knows by number only
// (the RoCEv2 engine).
void instant_qpn(uint32_t qpn, const char* what, const char* detail);
// A completion a peer (or the network) delivered was polled: the receives
// among them (ibv_wc_opcode, ibv_wc_status).
void received(uint32_t qpn, uint64_t wr_id, uint32_t opcode, uint32_t bytes, uint32_t status, uint32_t src_qp);
// QP `qpn` has sent and received so many packets.
void packets(uint32_t qpn, uint64_t sent, uint64_t received);

}  // namespace sv::trace
