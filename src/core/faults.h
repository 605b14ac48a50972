// Faults on demand (SOFTVERBS_FAULTS): a verbs call that fails with a
// chosen errno, a work request that completes with a chosen status (and
// everything a device does after it: the QP to ERR, the rest flushed), on
// the Nth time, every Nth time, with a probability, or after a time, so a
// test reaches the error paths a NIC reaches only when it must.
//
// SOFTVERBS_FAULTS holds rules separated by ';' or new lines (or names a
// file of them), each a comma-separated list of key=value:
//   call=ibv_reg_mr,errno=ENOMEM,nth=3
//   call=ibv_post_send,errno=ENOMEM,p=0.01
//   wc=RETRY_EXC_ERR,opcode=RDMA_WRITE,nth=100
//   wc=REM_ACCESS_ERR,qp=0x10004,every=50,count=2
//   late=20,opcode=RDMA_WRITE,every=10
//   event=QP_FATAL,nth=100
//   packet=drop,p=0.01
//   packet=delay,delay=5,dir=out,peer=10.0.0.2,opcode=RC_SEND_ONLY,every=20
//   seed=7
// call: ibv_alloc_pd, ibv_reg_mr (every reg_mr form), ibv_create_cq (and
// _ex), ibv_create_qp (and _ex), ibv_modify_qp, ibv_create_srq,
// ibv_create_ah, ibv_post_send, ibv_post_recv. event=QP_FATAL or CQ_ERR:
// at a post to the QP (qp= narrows it), the async event is raised and the
// QP goes to ERR, as a device's own fatal error would take it;
// event=DEVICE_FATAL: the event, every QP of the context to ERR, and from
// then on every call that needs the device fails with EIO. port=down: the
// port goes down after= seconds after the rules were read (PORT_ERR, the
// port's state DOWN, RoCEv2 packets lost both ways) and comes back for=
// seconds later (1 unless said; PORT_ACTIVE). vanish=kill: at
// a post (of sends or receives), the process dies of SIGKILL (a peer that
// vanishes mid-transfer). wc: a status name
// (IBV_WC_ optional); late=MS instead: the work request completes MS
// milliseconds late (executed that late; what follows waits behind it);
// opcode= (SEND, SEND_WITH_IMM, RDMA_WRITE,
// RDMA_WRITE_WITH_IMM, RDMA_READ, ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD)
// and qp= (a QPN) narrow it to matching send work requests. Triggers: nth=N
// (the Nth match, once), every=N (each Nth), p=P (each match with
// probability P, from a generator seeded by seed=, default 1), after=S (each
// match S seconds after the rules were read); count=K stops a rule after K
// faults. packet=drop|duplicate|reorder|delay|corrupt acts on RoCEv2
// packets between hosts (transport/roce_packet_faults.h), on the way out
// (dir=out, the default) or in (dir=in: drop, duplicate, corrupt), narrowed
// by peer= (an address), qp= (the BTH's destination QP) and opcode= (a BTH
// opcode: RC_ACKNOWLEDGE, RC_SEND_ONLY, ... or a number); delay= is in ms
// (10 unless said). Every fault is logged (warn) with its rule, and counted
// (injected()); SOFTVERBS_STAT_AT_EXIT prints the count.
#pragma once

#include <infiniband/verbs.h>
#include <netinet/in.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/fault_control.h"
#include "faults/fault_rules.h"

namespace sv::faults {

// True when rules for verbs (call=, wc=, event=) are in force: the checks
// below cost a load and a branch when none are. (The flag is in the control
// page, core/fault_control.h, where softverbs-stat may raise it.)
inline bool armed() { return g_control.armed; }
// True when packet= rules (packets between hosts) are in force.
inline bool packets_armed() { return g_control.packets; }
// Reads SOFTVERBS_FAULTS (done by the first context; idempotent). False, the
// reason logged, when it does not parse: then no device is listed.
bool load();

// The errno call `c` fails with now, or 0.
int call_fault(Call c);
inline int call(Call c) { return __builtin_expect(armed(), 0) ? call_fault(c) : 0; }

// What a send work request's completion gets: a status other than
// success (wc=), or to come `late_ns` late (late=; executed that much
// later, and what is posted after it waits behind it, in order).
struct CompletionFault {
  ibv_wc_status status = IBV_WC_SUCCESS;
  uint64_t late_ns = 0;
  uint64_t due_ns = 0;  // (late: when it may go, set when its turn first came)
};
// Whether the send work request (`qpn`, `opcode`) gets a completion fault
// now; *f then says which.
bool completion_fault_slow(uint32_t qpn, ibv_wr_opcode opcode, CompletionFault* f);
inline bool completion_fault(uint32_t qpn, ibv_wr_opcode opcode, CompletionFault* f) {
  return __builtin_expect(armed(), 0) && completion_fault_slow(qpn, opcode, f);
}

// What happens at a post to QP `qpn` now (event= and vanish= rules).
enum class PostFault : uint8_t {
  kNone,
  kQpFatal,      // IBV_EVENT_QP_FATAL; the QP to ERR
  kCqErr,        // IBV_EVENT_CQ_ERR for its send CQ; the QP to ERR
  kDeviceFatal,  // IBV_EVENT_DEVICE_FATAL; every QP to ERR, and what needs the device fails with EIO from now on
  kVanish,       // the process dies of SIGKILL, mid-transfer, as a crashed peer
};
// (`recv`: a post of receives, where only vanish= rules count.)
PostFault post_fault_slow(uint32_t qpn, bool recv);
inline PostFault post_fault(uint32_t qpn, bool recv) {
  return __builtin_expect(armed(), 0) ? post_fault_slow(qpn, recv) : PostFault::kNone;
}

struct PacketVerdict {
  PacketFault fault = PacketFault::kNone;
  uint64_t delay_ns = 0;  // kDelay
};
// What happens to a packet leaving for (`inbound` false) or arriving from
// (true) `peer`, for QP `dest_qpn` (the BTH's: the peer's QP on the way
// out, ours on the way in), BTH opcode `opcode`.
PacketVerdict packet_fault_slow(bool inbound, const in6_addr& peer, uint32_t dest_qpn, uint8_t opcode);
inline PacketVerdict packet_fault(bool inbound, const in6_addr& peer, uint32_t dest_qpn, uint8_t opcode) {
  return __builtin_expect(packets_armed(), 0) ? packet_fault_slow(inbound, peer, dest_qpn, opcode) : PacketVerdict{};
}

// Faults injected so far in this process.
uint64_t injected();

// From now on, these rules instead of those before (their counts start
// again; after= counts from now; the generator is seeded again).
void replace_rules(Rules rules);

}  // namespace sv::faults
