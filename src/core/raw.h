// Raw Ethernet: IBV_QPT_RAW_PACKET QPs send and receive whole frames on a
// network interface of the host (an AF_PACKET socket), with what a NIC's
// raw-packet engine adds: flow steering (ibv_create_flow), receive work
// queues and RSS indirection tables with Toeplitz hashing, TSO, checksum
// offload, FCS scattering, C-VLAN stripping, and flow counters.
//
// Receiving needs someone to read the socket while the application does
// something else: one thread per process (raw_port.cpp), started with the
// first raw QP, asleep in poll() when no frame comes. It delivers a frame
// to the QP (or work queue) whose flow matches best, as the responder
// delivers a SEND: a receive WQE, the bytes, a completion.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "core/packet.h"
#include "core/pd.h"
#include "core/recv_queue.h"
#include "util/private_heap.h"

namespace sv {

struct Qp;
struct Cq;
struct Flow;

// ---------------------------------------------------------------- counters

struct Counters : ibv_counters, PrivateHeapObject {
  struct Point {
    ibv_counter_description desc;
    uint32_t index;
  };
  PrivateVector<Point> points;          // attached with ibv_attach_counters_point_flow(NULL flow)
  PrivateVector<std::atomic<uint64_t>> values;  // by index
  std::atomic<int> flows{0};          // bound flows: no new attach points meanwhile
  static Counters* from(ibv_counters* c) { return static_cast<Counters*>(c); }
  void count(uint64_t bytes);
};

Counters* create_counters(Context* ctx, const ibv_counters_init_attr& attr);  // nullptr + errno
int destroy_counters(Counters* c);
int attach_counters_point_flow(Counters* c, const ibv_counter_attach_attr& attr, ibv_flow* flow);
int read_counters(Counters* c, uint64_t* values, uint32_t n, uint32_t flags);

// ---------------------------------------------------------------- work queues

struct Wq : ibv_wq, PrivateHeapObject {
  Context* ctx = nullptr;
  Pd* pd_obj = nullptr;
  Cq* cq_obj = nullptr;
  RecvQueue rq;
  uint32_t max_sge = 0;
  std::atomic<int> tables{0};  // indirection tables that name it: destroy fails with EBUSY
  static Wq* from(ibv_wq* w) { return static_cast<Wq*>(w); }
};

struct RwqIndTable : ibv_rwq_ind_table, PrivateHeapObject {
  Context* ctx = nullptr;
  PrivateVector<Wq*> wqs;  // 2^log_ind_tbl_size entries
  std::atomic<int> qps{0};
  static RwqIndTable* from(ibv_rwq_ind_table* t) { return static_cast<RwqIndTable*>(t); }
};

Wq* create_wq(Context* ctx, ibv_wq_init_attr* attr);  // nullptr + errno; caps written back
int modify_wq(Wq* wq, const ibv_wq_attr& attr);
int destroy_wq(Wq* wq);
RwqIndTable* create_rwq_ind_table(Context* ctx, const ibv_rwq_ind_table_init_attr& attr);
int destroy_rwq_ind_table(RwqIndTable* t);

// ---------------------------------------------------------------- flows

struct Flow : ibv_flow, PrivateHeapObject {
  Qp* qp = nullptr;
  ibv_flow_attr_type type = IBV_FLOW_ATTR_NORMAL;
  uint16_t priority = 0;
  uint64_t order = 0;  // creation order: among equal priorities, the older rule wins
  bool drop = false;
  bool dont_trap = false;  // IBV_FLOW_ATTR_FLAGS_DONT_TRAP: a copy, and lower rules still see the frame
  bool tagged = false;     // IBV_FLOW_SPEC_ACTION_TAG: completions carry `tag` (ibv_wc_read_flow_tag)
  uint32_t tag = 0;
  Counters* counters = nullptr;
  // The match, one spec per layer: a field matches when (frame & mask) == value.
  PrivateVector<ibv_flow_spec> specs;
  static Flow* from(ibv_flow* f) { return static_cast<Flow*>(f); }
};

Flow* create_flow(Qp* qp, ibv_flow_attr* attr);  // nullptr + errno
int destroy_flow(Flow* flow);
// Whether a NORMAL flow's specs all match the frame.
bool flow_matches(const Flow& flow, const packet::Parsed& frame);

// ---------------------------------------------------------------- the port

// CAP_NET_RAW, as the kernel requires for raw packet QPs and flows.
bool may_use_raw_packets();

// Attaches a new raw packet QP to its network interface (SOFTVERBS_NETDEV,
// else the first non-loopback interface that is up): 0 or an errno.
int raw_attach(Qp* qp);
void raw_detach(Qp* qp);

// The requester's half: one SEND or TSO work request of a raw QP.
// IBV_WC_SUCCESS or the completion's error status.
ibv_wc_status raw_send(Qp* qp, const uint8_t* frame, size_t len, unsigned send_flags);
ibv_wc_status raw_send_tso(Qp* qp, const uint8_t* hdr, size_t hdr_len, uint16_t mss, const uint8_t* payload,
                           size_t len, unsigned send_flags);

// Flows take part in steering from creation to destruction.
void raw_add_flow(Flow* flow);
void raw_remove_flow(Flow* flow);

}  // namespace sv
