// A device context (ibv_context): what one ibv_open_device returns. It owns
// the async event queue and keeps the table of its QPs, CQs and SRQs so that
// events and errors raised by peers can be turned back into object pointers.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/gid_table.h"
#include "shm/doorbell.h"
#include "shm/host.h"
#include "util/private_heap.h"

namespace sv {

struct Cq;
struct Qp;
struct Srq;
class Transport;

struct Context : verbs_context, PrivateHeapObject {
  // Every verb reaches its context through here: a context a fork() child
  // inherited is reopened in the child on its first use (mlx5's context works
  // in a child that inherited its file; rdma-core's tests allocate device
  // memory from forked children). The parent's objects stay the parent's.
  static Context* from(ibv_context* c) {
    auto* ctx = static_cast<Context*>(reinterpret_cast<verbs_context*>(reinterpret_cast<uint8_t*>(c) -
                                                                       offsetof(verbs_context, context)));
    if (__builtin_expect(ctx->fork_generation != shm::Host::fork_generation(), 0)) ctx->reopen_in_fork_child();
    return ctx;
  }
  ibv_context* ibv() { return &context; }

  shm::Host* host = nullptr;
  uint32_t fork_generation = 0;  // shm::Host::fork_generation() when it was opened
  uint32_t index = 0;  // our ContextShared slot in the arena
  shm::ContextShared* shared = nullptr;
  shm::Doorbell async_bell;

  // GID table snapshot (with each interface's MTU), refreshed when older
  // than a second or when the link watcher saw a change (link_watch.h).
  std::mutex gid_mu;
  PrivateVector<GidEntry> gids;
  uint64_t gids_read_ns = 0;

  std::mutex objects_mu;
  PrivateUnorderedMap<uint32_t, Qp*> qps;   // by QPN
  PrivateUnorderedMap<uint32_t, Cq*> cqs;   // by CQ id
  PrivateUnorderedMap<uint32_t, Srq*> srqs; // by SRQ number
  std::mutex async_mu;  // readers of the async ring
  std::atomic<uint32_t> next_cq_id{1};
  std::atomic<uint32_t> cq_count{0};
  std::atomic<uint32_t> ah_count{0};

  // How messages leave this context: to a GID of this host (or a multicast
  // group, whose members on this host are reached in shared memory), through
  // shared memory; to any other GID, through the network transport (RoCEv2).
  Transport* local_transport = nullptr;
  Transport* remote_transport = nullptr;
  Transport* transport_for(const ibv_gid& dgid) {
    return is_local_gid(dgid) || gid_is_multicast(dgid) ? local_transport : remote_transport;
  }
  // A connected QP's way to `dgid`'s QP `dst_qpn`: as transport_for, but
  // with a host service (shm/host_service.h) a QPN of this host that none
  // of our user's live processes has is another user's, reached through
  // the network path (the service), never in shared memory.
  Transport* transport_for(const ibv_gid& dgid, uint32_t dst_qpn);
  // Calls fn(Transport&) for each of the context's transports, once each:
  // what they must hear about a QP or an MR, whichever carries its traffic.
  template <typename Fn>
  void for_each_transport(Fn fn) {
    if (local_transport) fn(*local_transport);
    if (remote_transport && remote_transport != local_transport) fn(*remote_transport);
  }

  // Creates the context: joins the host, claims a ContextShared slot and
  // opens the async doorbell. nullptr (errno set) on failure.
  static Context* create(ibv_device* dev);
  void destroy();
  // Makes the per-context shared-memory transport (set by the verbs layer,
  // which links the transports).
  static inline Transport* (*make_local_transport)(Context*) = nullptr;

  // GID table access. Returns false when `index` holds no GID.
  bool gid_at(int index, GidEntry* out);
  int gid_count();
  // The GID table (a copy): what port attributes and LIDs derive from.
  PrivateVector<GidEntry> gid_table();
  // The next lookup reads the host's addresses (and link MTUs) again: they changed.
  void forget_gids();
  // Index of `gid` in the table, or -1.
  int find_gid(const ibv_gid& gid);
  // True when `gid` is an address of this host (reachable in shared memory).
  bool is_local_gid(const ibv_gid& gid) { return find_gid(gid) >= 0; }
  // InfiniBand mode (core/lid.h): this port's LID, and the GID a LID
  // stands for (false: none).
  uint16_t lid();
  bool gid_of_lid(uint16_t lid, ibv_gid* out);

  Qp* qp_by_num(uint32_t qpn);
  Cq* cq_by_id(uint32_t id);
  Srq* srq_by_num(uint32_t srqn);

 private:
  bool attach(shm::Host* h);  // takes a slot in h's arena and a doorbell; false + errno
  void reopen_in_fork_child();
  void refresh_gids_locked();
};

}  // namespace sv
