// Protection domains and address handles.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <memory>

#include "core/context.h"
#include "util/private_heap.h"

namespace sv {

struct Pd : ibv_pd, PrivateHeapObject {
  Context* ctx = nullptr;
  uint32_t id = 0;              // process-unique; stored in shared QP/MR entries
  // MRs, QPs, SRQs, AHs of the PD, whichever of its structs (the original or
  // an import) they were made on: dealloc fails with EBUSY.
  std::shared_ptr<std::atomic<int>> uses = make_private_shared<std::atomic<int>>(0);
  bool imported = false;        // made by ibv_import_pd
  uint64_t serial = 0;          // the life of the PD (core/handles.h)
  std::atomic<int>& users() { return *uses; }
  static Pd* from(ibv_pd* p) { return static_cast<Pd*>(p); }
};

Pd* alloc_pd(Context* ctx);
int dealloc_pd(Pd* pd);
// ibv_import_pd: another struct for the live PD `handle`; nullptr + errno.
Pd* import_pd(Context* ctx, uint32_t handle);
void unimport_pd(Pd* pd);

class Transport;

// Where a message goes: the fields of an address vector that matter here,
// resolved once (when the QP connects, or when the AH is created).
struct Destination {
  ibv_gid dgid{};
  ibv_gid sgid{};               // our GID at sgid_index
  Transport* route = nullptr;   // the transport that reaches dgid; null: none
  uint32_t qpn = 0;
  uint32_t qkey = 0;
  uint32_t flow_label = 0;
  uint8_t sgid_index = 0;
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;
  uint8_t sl = 0;
  uint16_t slid = 0;            // InfiniBand mode: the sender's LID, reported to the receiver
};

struct Ah : ibv_ah, PrivateHeapObject {
  ibv_ah_attr attr{};
  Destination dest;  // qpn and qkey come with each work request
  static Ah* from(ibv_ah* a) { return static_cast<Ah*>(a); }
};

// Resolves the source GID and route of an address vector (already checked).
Destination resolve_destination(Context* ctx, const ibv_ah_attr& attr);

// Validates an address vector for port 1: a GRH with a valid source GID
// index (required on the RoCE port), or in InfiniBand mode a unicast LID.
// Returns 0 or an errno.
int check_ah_attr(Context* ctx, const ibv_ah_attr& attr);

Ah* create_ah(Pd* pd, const ibv_ah_attr& attr);  // nullptr + errno
int destroy_ah(Ah* ah);

}  // namespace sv
