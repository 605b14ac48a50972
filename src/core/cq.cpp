#include "core/limit_reached.h"
#include "core/cq.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/async_events.h"
#include "core/check.h"
#include "core/check_buffers.h"
#include "core/channel.h"
#include "core/idle_poll.h"
#include "core/context.h"
#include "core/device_profile.h"
#include "core/faults.h"
#include "core/limits.h"
#include "util/knobs.h"
#include "core/qp.h"
#include "core/trace.h"
#include "core/recv_queue.h"
#include "core/transport.h"
#include "shm/registry.h"
#include "shm/shared_lock.h"
#include "util/bits.h"
#include "util/clock.h"
#include "util/log.h"

namespace sv {
namespace {

constexpr uint64_t kSupportedWcFlags =
    IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
    IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS |
    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK | IBV_WC_EX_WITH_CVLAN |
    IBV_WC_EX_WITH_FLOW_TAG;

void to_wc(const shm::CqeFields& c, ibv_wc* wc) {
  wc->wr_id = c.wr_id;
  wc->status = static_cast<ibv_wc_status>(c.status);
  wc->opcode = static_cast<ibv_wc_opcode>(c.opcode);
  wc->vendor_err = c.vendor_err;
  wc->byte_len = c.byte_len;
  wc->imm_data = c.imm_or_inv;
  wc->qp_num = c.qp_num;
  wc->src_qp = c.src_qp;
  wc->wc_flags = c.wc_flags;
  wc->pkey_index = c.pkey_index;
  wc->slid = c.slid;
  wc->sl = c.sl;
  wc->dlid_path_bits = c.dlid_path_bits;
}


// Fires the completion event if the CQ is armed for this kind of entry.
// Errors and solicited entries satisfy a solicited-only arm (IBTA 11.4.2.2).
bool consume_arm(shm::CqShared* cq, bool solicited_or_error) {
  // Order the entry's publication before reading `armed`: the consumer arms
  // and then polls, so one of the two sides always sees the other.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  uint32_t a = cq->armed.load(std::memory_order_relaxed);
  if (a == shm::kDisarmed || (a == shm::kArmedSolicited && !solicited_or_error)) return false;
  if (!cq->armed.compare_exchange_strong(a, shm::kDisarmed)) return false;
  cq->event_pending.store(1, std::memory_order_release);
  return true;
}

// A producer that died between publishing an entry and advancing tail left
// the entry valid: the one that takes its lock over counts it.
void repair_tail(shm::CqShared* cq, shm::Cqe* ring) {
  uint64_t t = cq->tail;
  if (ring[t & (cq->capacity - 1)].seq.load(std::memory_order_acquire) == t + 1)
    std::atomic_ref<uint64_t>(cq->tail).store(t + 1, std::memory_order_release);
}

uint64_t shared_tail(const shm::CqShared* s) {
  return std::atomic_ref<const uint64_t>(s->tail).load(std::memory_order_acquire);
}

// Completions waiting in the shared ring, given its tail. Producers publish
// an entry before advancing `tail`, so the owner may have taken it already:
// head can pass tail for a moment.
uint64_t shared_waiting(const shm::CqShared* s, uint64_t tail) {
  uint64_t head = s->head.load(std::memory_order_acquire);
  return tail > head ? tail - head : 0;
}

bool wants_event(const shm::CqeFields& c) { return c.solicited || c.status != IBV_WC_SUCCESS; }

void report_overrun(Cq* cq) {
  if (!cq->error_reported.exchange(true)) {
    SV_WARN("CQ %u overrun (cqe %d): completions were lost", cq->id, cq->cqe);
    raise_async_local(cq->ctx, IBV_EVENT_CQ_ERR, shm::kAsyncCq, cq->id);
  }
}

}  // namespace

Cq* create_cq(Context* ctx, int cqe, void* cq_context, Channel* chan, int comp_vector, uint64_t wc_flags) {
  if (int e = faults::call(faults::Call::kCreateCq)) {
    errno = e;
    return nullptr;
  }
  if (cqe < 1 || static_cast<uint32_t>(cqe) > device_profile().max_cqe || comp_vector < 0 ||
      comp_vector >= ctx->context.num_comp_vectors) {
    errno = EINVAL;
    return nullptr;
  }
  if (wc_flags & ~kSupportedWcFlags) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if (ctx->cq_count.fetch_add(1) >= device_profile().max_cq) {
    ctx->cq_count.fetch_sub(1);
    limit_reached(Limit::kCqs, device_profile().max_cq);
    errno = ENOMEM;
    return nullptr;
  }
  shm::Arena& arena = ctx->host->arena();
  uint64_t cap = round_up_pow2(static_cast<uint64_t>(cqe) + 1);
  uint64_t shared_off = arena.alloc(sizeof(shm::CqShared));
  uint64_t ring_off = shared_off ? arena.alloc(cap * sizeof(shm::Cqe)) : 0;
  if (!ring_off) {
    if (shared_off) arena.free(shared_off, sizeof(shm::CqShared));
    ctx->cq_count.fetch_sub(1);
    limit_reached(Limit::kSharedMemory, knobs().arena_bytes);
    errno = ENOMEM;
    return nullptr;
  }
  auto* cq = new Cq();
  cq->ctx = ctx;
  cq->id = ctx->next_cq_id.fetch_add(1);
  cq->shared_off = shared_off;
  cq->shared = arena.at<shm::CqShared>(shared_off);
  cq->ring = arena.at<shm::Cqe>(ring_off);
  cq->mask = cap - 1;
  cq->local.resize(cap);
  cq->wc_flags = wc_flags;
  cq->chan = chan;

  shm::CqShared* s = cq->shared;
  s->capacity = static_cast<uint32_t>(cap);
  s->cq_id = cq->id;
  s->ctx_index = ctx->index;
  s->ring_off = ring_off;
  if (check::on()) s->attention.store(check::kAttentionChecks, std::memory_order_relaxed);  // (poll_cq_checked)
  if (wc_flags & (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK))
    s->flags |= shm::kCqTimestamps;
  if (chan) {
    s->doorbell_gen.store(chan->bell.gen(), std::memory_order_relaxed);
    s->doorbell.store(chan->bell.index() + 1, std::memory_order_release);
    channel_attach(chan, cq);
  }

  cq->context = ctx->ibv();
  cq->channel = chan;
  cq->cq_context = cq_context;
  cq->handle = cq->id;
  cq->cqe = static_cast<int>(cap - 1);
  pthread_mutex_init(&cq->mutex, nullptr);
  pthread_cond_init(&cq->cond, nullptr);
  install_cq_ex_ops(cq);
  {
    std::lock_guard g(ctx->objects_mu);
    ctx->cqs[cq->id] = cq;
  }
  return cq;
}

int destroy_cq(Cq* cq) {
  if (cq->users.load() != 0) return EBUSY;
  Context* ctx = cq->ctx;
  {
    std::lock_guard g(ctx->objects_mu);
    ctx->cqs.erase(cq->id);
  }
  if (cq->chan) channel_detach(cq->chan, cq);
  // As libibverbs does: wait until every event we handed out was acked.
  pthread_mutex_lock(&cq->mutex);
  if (check::on() && cq->comp_events_completed != cq->events_reported)
    check::report("unacked-events",
                  "ibv_destroy_cq: %u completion events from ibv_get_cq_event not acknowledged "
                  "(ibv_ack_cq_events): it waits for them",
                  cq->events_reported - cq->comp_events_completed);
  while (cq->comp_events_completed != cq->events_reported ||
         cq->async_events_completed != cq->async_reported)
    pthread_cond_wait(&cq->cond, &cq->mutex);
  pthread_mutex_unlock(&cq->mutex);
  shm::Arena& arena = ctx->host->arena();
  cq->shared->doorbell.store(0, std::memory_order_release);
  arena.free(cq->shared->ring_off, uint64_t{cq->shared->capacity} * sizeof(shm::Cqe));
  arena.free(cq->shared_off, sizeof(shm::CqShared));
  ctx->cq_count.fetch_sub(1);
  delete cq;
  return 0;
}

namespace {

// Takes the oldest completion of the two rings and hands it to `use` in
// place: poll_cq turns it straight into an ibv_wc. Taking the shared ring
// first whenever it had something starved our own completions: a peer's
// receive completion arriving before each poll_cq(n = 1) kept the send
// completions behind it, and the send queue filled (rping did this).
// A purge can match nothing any more once its stragglers' time is over and
// polling has passed the positions it was taken at.
bool purge_spent(const Cq* cq, const Cq::Purge& p, uint64_t now) {
  return now >= p.until_ns && cq->head >= p.shared_before &&
         cq->local_head.load(std::memory_order_relaxed) >= p.local_before;
}

// Lets go of every spent purge, at most once a second: each poll and destroy
// looks at one purge only, and this keeps the table to the QPs destroyed in
// the last seconds at a cost per call that stays constant.
void sweep_purges(Cq* cq, uint64_t now) {
  if (now - cq->purges_swept_ns < 1'000'000'000ull) return;
  cq->purges_swept_ns = now;
  std::erase_if(cq->purges, [cq, now](const auto& qpn_purge) { return purge_spent(cq, qpn_purge.second, now); });
}

// Whether the entry at `pos` of a ring belongs to a destroyed QP.
bool purged(Cq* cq, uint32_t qpn, bool shared, uint64_t pos) {
  const uint64_t now = monotonic_ns();
  auto it = cq->purges.find(qpn);
  if (it == cq->purges.end()) {
    sweep_purges(cq, now);
    return false;
  }
  const Cq::Purge& p = it->second;
  if (pos < (shared ? p.shared_before : p.local_before) || now < p.until_ns) return true;
  if (purge_spent(cq, p, now)) cq->purges.erase(it);
  return false;
}

// The receive queue QP `qpn` of this process takes its WQEs from, or nullptr.
shm::RecvQueueShared* own_receive_queue(Cq* cq, uint32_t qpn) {
  shm::Host& host = *cq->ctx->host;
  shm::Arena& arena = host.arena();
  const shm::QpSlotEntry& e = arena.qp_table()[shm::qpn_index(qpn)];
  if (e.qpn.load(std::memory_order_acquire) != qpn) return nullptr;
  const auto* t = arena.at<shm::QpShared>(e.shared_off.load(std::memory_order_acquire));
  const uint64_t off = t->srq_off ? t->srq_off : t->rq_off;
  return off ? arena.at<shm::RecvQueueShared>(off) : nullptr;
}

// A receive completion on the timeline (core/trace.h).
[[gnu::noinline, gnu::cold]] void trace_receive(const shm::CqeFields& c) {
  trace::received(c.qp_num, c.wr_id, c.opcode, c.byte_len, c.status, c.src_qp);
}

// A peer's receive completion: its WQE is gone from the queue. (And the
// timeline's receive event.)
void note_receive(Cq* cq, const shm::CqeFields& c) {
  if (c.qp_num != cq->rq_qpn || !cq->rq) {
    cq->rq = own_receive_queue(cq, c.qp_num);
    cq->rq_qpn = c.qp_num;
  }
  if (cq->rq) note_receive_taken(cq->rq, c.rq_pos);
  if (__builtin_expect(trace::g_on, 0)) trace_receive(c);
}

template <class Use>
inline bool take_oldest(Cq* cq, Use&& use) {
  for (;;) {
    shm::Cqe& s = cq->ring[cq->head & cq->mask];
    const bool shared_ready = s.seq.load(std::memory_order_acquire) == cq->head + 1;
    const uint64_t h = cq->local_head.load(std::memory_order_relaxed);
    LocalCqe* l = h != cq->local_tail.load(std::memory_order_acquire) ? &cq->local[h & cq->mask] : nullptr;
    // A private entry added when the shared tail had not reached this shared
    // entry is the older one.
    if (shared_ready && !(l && l->shared_tail <= cq->head)) {
      const bool drop = !cq->purges.empty() && purged(cq, s.f.qp_num, true, cq->head);
      if (!drop) {
        if (s.f.rq_pos) note_receive(cq, s.f);
        use(s.f);
      }
      ++cq->head;
      cq->shared->head.store(cq->head, std::memory_order_release);
      if (drop) continue;
      return true;
    }
    if (!l) return false;
    const bool drop = !cq->purges.empty() && purged(cq, l->cqe.qp_num, false, h);
    if (!drop) use(l->cqe);
    // A polled send completion frees its send-queue slot and every earlier
    // (unsignaled) one, as on a NIC.
    if (l->qp) l->qp->sq_head.store(l->sq_pos + 1, std::memory_order_release);
    cq->local_head.store(h + 1, std::memory_order_release);
    if (!drop) return true;
  }
}

}  // namespace

void forget_qp_completions(Cq* cq, uint32_t qpn, bool with_stragglers) {
  std::lock_guard g(cq->poll_mu);
  cq->rq = nullptr;
  cq->rq_qpn = 0;
  const uint64_t now = monotonic_ns();
  sweep_purges(cq, now);
  // A purge already there (the QPN's previous QP, destroyed less than two
  // seconds ago) keeps its stragglers' time; the positions are later now.
  Cq::Purge& p = cq->purges[qpn];
  p.shared_before = shared_tail(cq->shared);
  p.local_before = cq->local_tail.load(std::memory_order_acquire);
  p.until_ns = std::max<uint64_t>(p.until_ns, with_stragglers ? now + 2'000'000'000ull : 0);
}

bool take_one(Cq* cq, shm::CqeFields* out) {
  return take_oldest(cq, [out](const shm::CqeFields& c) { *out = c; });
}

// Whether take_one would find something, without taking the lock: most
// polls of a busy-waiting application find nothing.
bool maybe_ready(const Cq* cq) {
  return cq->ring[cq->head & cq->mask].seq.load(std::memory_order_acquire) == cq->head + 1 ||
         cq->local_head.load(std::memory_order_relaxed) != cq->local_tail.load(std::memory_order_acquire) ||
         cq->shared->attention.load(std::memory_order_relaxed);
}

// Nothing waiting: with network traffic about, receive what has arrived
// (core/transport.h g_network_in_use) and look again.
bool ready_after_progress(Cq* cq) {
  if (__builtin_expect(!g_network_in_use.load(std::memory_order_relaxed), 1)) return false;
  cq->ctx->for_each_transport([](Transport& t) { t.progress(); });
  if (maybe_ready(cq)) return true;
  idle_poll();  // (a thread that waits long gives its core to those with work: core/idle_poll.h)
  return false;
}

// poll_cq with SOFTVERBS_CHECK on (the CQ's attention bit): each send
// completion taken, the memory of the work requests whose slots it frees
// is compared with what they sent (check_buffers.h). Under poll_mu.
[[gnu::noinline, gnu::cold]] int poll_cq_checked(Cq* cq, int n, ibv_wc* wc) {
  int got = 0;
  while (got < n && take_oldest(cq, [wc, got](const shm::CqeFields& c) { to_wc(c, &wc[got]); })) {
    if (!(wc[got].opcode & IBV_WC_RECV)) {
      Qp* qp = nullptr;
      {
        std::lock_guard g(cq->ctx->objects_mu);
        auto it = cq->ctx->qps.find(wc[got].qp_num);
        if (it != cq->ctx->qps.end()) qp = it->second;
      }
      if (qp) check::verify_freed(qp);
    }
    ++got;
  }
  return got;
}

void lock_poll_contended(Cq* cq) {
  if (check::on() && cq->single_threaded && !cq->two_pollers_reported.exchange(true))
    check::report("single-thread-cq",
                  "CQ %u, created with IBV_CREATE_CQ_ATTR_SINGLE_THREADED, polled by two threads at once: a provider "
                  "that takes the hint (mlx5) polls it without a lock",
                  cq->id);
  cq->poll_mu.lock();
}

int poll_cq(Cq* cq, int n, ibv_wc* wc) {
  if (n < 0) return -EINVAL;
  if (!maybe_ready(cq) && !ready_after_progress(cq)) return 0;
  // A peer's error flagged on our QPs takes effect before poll_mu is
  // taken: it takes their sq_mu, which modify_qp(RESET) holds while it
  // takes poll_mu (forget_completions); in the other order the two could
  // each wait for the other for ever.
  if (cq->shared->attention.load(std::memory_order_relaxed)) handle_qp_attention(cq);
  lock_poll(cq);
  std::lock_guard g(cq->poll_mu, std::adopt_lock);
  if (cq->shared->attention.load(std::memory_order_relaxed) & check::kAttentionChecks)
    return poll_cq_checked(cq, n, wc);
  int got = 0;
  while (got < n && take_oldest(cq, [wc, got](const shm::CqeFields& c) { to_wc(c, &wc[got]); })) ++got;
  return got;
}

int req_notify_cq(Cq* cq, int solicited_only) {
  cq->shared->armed.store(solicited_only ? shm::kArmedSolicited : shm::kArmedNext, std::memory_order_seq_cst);
  return 0;
}

void push_local(Cq* cq, const shm::CqeFields& c, Qp* qp, uint64_t sq_pos) {
  {
    std::lock_guard g(cq->produce_mu);
    uint64_t t = cq->local_tail.load(std::memory_order_relaxed);
    const uint64_t stail = shared_tail(cq->shared);
    // Completions waiting in both rings count against cqe.
    uint64_t waiting = t - cq->local_head.load(std::memory_order_acquire) + shared_waiting(cq->shared, stail);
    if (waiting >= static_cast<uint64_t>(cq->cqe)) {
      report_overrun(cq);
      return;
    }
    LocalCqe& l = cq->local[t & cq->mask];
    l.cqe = c;
    if (cq->shared->flags & shm::kCqTimestamps) l.cqe.ts_ns = monotonic_ns();
    l.qp = qp;
    l.sq_pos = sq_pos;
    l.shared_tail = stail;
    cq->local_tail.store(t + 1, std::memory_order_release);
  }
  if (cq->chan && consume_arm(cq->shared, wants_event(c))) cq->chan->bell.ring();
}

bool push_shared(shm::PeerTable& peers, const shm::Peer& owner, shm::CqShared* cq, const shm::CqeFields& c) {
  {
    shm::SharedLockGuard lock(cq->produce_lock, peers.lock_id(), *peers.registry().header());
    uint64_t cap = cq->capacity;  // holds cap - 1 completions: the CQ's cqe
    auto* ring = owner.at<shm::Cqe>(cq->ring_off);
    if (!ring || !owner.contains(cq->ring_off, cap * sizeof(shm::Cqe))) return false;
    if (lock.stolen()) repair_tail(cq, ring);
    uint64_t t = cq->tail;
    if (t - cq->cached_head >= cap - 1) {
      cq->cached_head = cq->head.load(std::memory_order_acquire);
      if (t - cq->cached_head >= cap - 1) return false;  // overrun: the caller reports it
    }
    shm::Cqe& slot = ring[t & (cap - 1)];
    slot.f = c;
    if (cq->flags & shm::kCqTimestamps) slot.f.ts_ns = monotonic_ns();
    // The entry first, then tail (see the repair above). The consumer may
    // take the entry before tail moves, so head can pass tail for a moment:
    // shared_waiting() allows for it.
    slot.seq.store(t + 1, std::memory_order_release);
    std::atomic_ref<uint64_t>(cq->tail).store(t + 1, std::memory_order_release);
  }
  // Without a completion channel there is nobody to wake.
  uint32_t bell = cq->doorbell.load(std::memory_order_acquire);
  if (bell && consume_arm(cq, wants_event(c))) {
    peers.ring_doorbell(owner, bell - 1, cq->doorbell_gen.load(std::memory_order_relaxed));
  }
  return true;
}

int resize_cq(Cq* cq, int cqe) {
  if (cqe < 1 || static_cast<uint32_t>(cqe) > device_profile().max_cqe) return EINVAL;
  shm::Arena& arena = cq->ctx->host->arena();
  uint64_t cap = round_up_pow2(static_cast<uint64_t>(cqe) + 1);
  std::lock_guard g(cq->poll_mu);
  std::lock_guard p(cq->produce_mu);
  shm::CqShared* s = cq->shared;
  shm::PeerTable& peers = cq->ctx->host->peers();
  shm::SharedLockGuard lock(s->produce_lock, peers.lock_id(), *peers.registry().header());
  if (lock.stolen()) repair_tail(s, cq->ring);
  uint64_t shared_pending = s->tail - cq->head;
  uint64_t local_pending = cq->local_tail.load() - cq->local_head.load();
  if (shared_pending + local_pending > cap - 1) return EINVAL;  // fewer entries than completions waiting
  uint64_t ring_off = arena.alloc(cap * sizeof(shm::Cqe));
  if (!ring_off) return ENOMEM;
  // Move pending entries, keeping their positions (and so their seq).
  auto* ring = arena.at<shm::Cqe>(ring_off);
  for (uint64_t pos = cq->head; pos < s->tail; ++pos) {
    ring[pos & (cap - 1)].f = cq->ring[pos & cq->mask].f;
    ring[pos & (cap - 1)].seq.store(pos + 1, std::memory_order_relaxed);
  }
  PrivateVector<LocalCqe> local(cap);
  for (uint64_t pos = cq->local_head.load(); pos < cq->local_tail.load(); ++pos)
    local[pos & (cap - 1)] = cq->local[pos & cq->mask];
  arena.free(s->ring_off, uint64_t{s->capacity} * sizeof(shm::Cqe));
  s->ring_off = ring_off;
  s->capacity = static_cast<uint32_t>(cap);
  cq->ring = ring;
  cq->mask = cap - 1;
  cq->local.swap(local);
  cq->cqe = static_cast<int>(cap - 1);
  return 0;
}

}  // namespace sv
