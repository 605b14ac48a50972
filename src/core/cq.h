// Completion queues. A CQ has two rings:
//  * a shared ring in the arena (shm::CqShared), written by peers that
//    deliver messages to our QPs (receive completions), under a robust lock;
//  * a private ring, written only by this process (send completions,
//    flushes), so our own completions never bounce a peer's cache lines.
// ibv_poll_cq takes the older of the two rings' oldest entries: each private
// entry records how far the shared ring had got when it was added (a value
// the overrun check reads anyway), so no counter is shared between them.
// Overrun (more than cqe completions waiting): when this process adds a
// completion it counts both rings, exactly; a peer adding one counts only
// the shared ring (reading our private count would put a cross-process cache
// miss on every delivery), so a peer's completion into a CQ that only our own
// completions filled is refused by the ring, or reported at our next one.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "core/context.h"
#include "shm/layout.h"
#include "shm/peers.h"
#include "util/spin_lock.h"
#include "util/private_heap.h"

namespace sv {

struct Qp;
struct Channel;

// A completion produced by this process, with what polling must do when the
// application consumes it (free send-queue slots, as a NIC does).
struct LocalCqe {
  shm::CqeFields cqe;
  Qp* qp;           // owner of the send queue slot, or nullptr
  uint64_t sq_pos;  // slots up to and including this one become free
  // The shared ring's tail when this entry was added: shared entries at or
  // after it are younger. Polling takes the older of the two rings' heads,
  // so the CQ stays first-in first-out as a NIC's is.
  uint64_t shared_tail;
};

struct Cq : ibv_cq_ex, PrivateHeapObject {
  static Cq* from(ibv_cq* c) { return static_cast<Cq*>(reinterpret_cast<ibv_cq_ex*>(c)); }
  static Cq* from(ibv_cq_ex* c) { return static_cast<Cq*>(c); }
  ibv_cq* ibv() { return reinterpret_cast<ibv_cq*>(static_cast<ibv_cq_ex*>(this)); }

  Context* ctx = nullptr;
  uint32_t id = 0;
  uint64_t shared_off = 0;
  shm::CqShared* shared = nullptr;
  shm::Cqe* ring = nullptr;  // shared ring, consumer view
  uint64_t mask = 0;
  uint64_t head = 0;         // consumer position in the shared ring

  PrivateVector<LocalCqe> local;
  std::atomic<uint64_t> local_head{0};
  std::atomic<uint64_t> local_tail{0};
  SpinLock produce_mu;  // local ring producers
  SpinLock poll_mu;     // consumers (poll_cq, start/end_poll, resize)
  // Created IBV_CREATE_CQ_ATTR_SINGLE_THREADED: the application says one
  // thread polls it (SOFTVERBS_CHECK reports two at once: lock_poll).
  bool single_threaded = false;
  std::atomic<bool> two_pollers_reported{false};

  Channel* chan = nullptr;
  uint64_t wc_flags = 0;     // what the extended poll API may read
  std::atomic<int> users{0}; // QPs and SRQs: destroy fails with EBUSY
  uint32_t events_reported = 0;  // completion events handed out (under ibv mutex)
  uint32_t async_reported = 0;   // async events handed out
  std::atomic<bool> error_reported{false};
  // SOFTVERBS_CHECK's cq-too-small (core/check.h): the completions the QPs
  // on it may have outstanding at once, and whether that was reported.
  std::atomic<uint64_t> check_load{0};
  std::atomic<bool> check_reported{false};

  // Extended polling (ibv_start_poll/next_poll/end_poll).
  shm::CqeFields current{};
  int64_t wallclock_offset_ns = 0;

  // Completions of QPs destroyed while some were waiting: polling drops
  // them (forget_qp_completions). By QPN, so polling looks one up per
  // entry whatever the number of QPs destroyed (65536 destroyed QPs made a
  // list walked per entry). Under poll_mu.
  struct Purge {
    uint64_t shared_before, local_before;  // ring positions taken at destroy
    uint64_t until_ns;                     // and stragglers until then
  };
  PrivateUnorderedMap<uint32_t, Purge> purges;
  uint64_t purges_swept_ns = 0;  // when purges that can match nothing were last let go

  // The receive queue of the QP whose receive completion was polled last
  // (the QP's own or its SRQ), found through the arena's QP table: polling
  // raises its `seen` from each completion (CqeFields::rq_pos). Under
  // poll_mu; forget_qp_completions clears it, so a destroyed QP's queue is
  // never touched.
  uint32_t rq_qpn = 0;
  shm::RecvQueueShared* rq = nullptr;
};

Cq* create_cq(Context* ctx, int cqe, void* cq_context, Channel* chan, int comp_vector, uint64_t wc_flags);
// Takes the CQ's poll_mu. Found taken, a CQ created single-threaded is
// being polled by another thread: with SOFTVERBS_CHECK, reported.
void lock_poll_contended(Cq* cq);
inline void lock_poll(Cq* cq) {
  if (__builtin_expect(!cq->poll_mu.try_lock(), 0)) lock_poll_contended(cq);
}
int destroy_cq(Cq* cq);
int resize_cq(Cq* cq, int cqe);
int poll_cq(Cq* cq, int n, ibv_wc* wc);
// Whether a completion may be waiting (no lock taken).
bool maybe_ready(const Cq* cq);
// For a CQ with nothing waiting: lets the network transport make progress
// (core/transport.h); true if that produced something.
bool ready_after_progress(Cq* cq);
int req_notify_cq(Cq* cq, int solicited_only);

// Takes the oldest completion of the two rings. The caller holds poll_mu.
bool take_one(Cq* cq, shm::CqeFields* out);

// ibv_destroy_qp: the completions of QP `qpn` still waiting in `cq` go with
// it, as mlx5 cleans a destroyed QP's CQEs from its CQs. Middleware relies
// on it: libfabric's rxm reposted a receive buffer on the closed endpoint
// of a completion polled after the close, and died of SIGSEGV. A peer that
// was delivering to the QP as it went may still add one a moment later:
// those are dropped too, for two seconds (QP numbers come back far later).
// A QP moved to RESET: its waiting completions go too, as mlx5's
// mlx5_modify_qp cleans them (mlx5_cq_clean), but nothing it completes
// afterwards (no stragglers window: the QP accepts nothing while in RESET).
void forget_qp_completions(Cq* cq, uint32_t qpn, bool with_stragglers = true);

// Owner-side production. Raises IBV_EVENT_CQ_ERR when the ring is full.
void push_local(Cq* cq, const shm::CqeFields& c, Qp* qp, uint64_t sq_pos);

// Producer-side (any process, including the owner) production into the
// shared ring of the CQ described by `cq` in `owner`'s arena. Wakes the
// owner if the CQ is armed. False when the ring overflowed.
bool push_shared(shm::PeerTable& peers, const shm::Peer& owner, shm::CqShared* cq, const shm::CqeFields& c);

// The shared CQ of `owner` at arena offset `off`, or nullptr if implausible.
inline shm::CqShared* peer_cq(const shm::Peer& owner, uint64_t off) {
  auto* cq = owner.at<shm::CqShared>(off);
  if (!cq || !owner.contains(cq->ring_off, uint64_t{cq->capacity} * sizeof(shm::Cqe))) return nullptr;
  return cq;
}

void install_cq_ex_ops(Cq* cq);  // fills the ibv_cq_ex function pointers

}  // namespace sv
