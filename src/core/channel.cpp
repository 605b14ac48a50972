#include "core/channel.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "core/cq.h"

namespace sv {

Channel* create_channel(Context* ctx) {
  auto* ch = new Channel();
  if (!ch->bell.open(ctx->host->arena())) {
    int e = errno;
    delete ch;
    errno = e;
    return nullptr;
  }
  ch->ctx = ctx;
  ch->context = ctx->ibv();
  ch->fd = ch->bell.read_fd();
  ch->refcnt = 0;
  return ch;
}

int destroy_channel(Channel* ch) {
  {
    std::lock_guard g(ch->mu);
    if (ch->refcnt != 0 || !ch->cqs.empty()) return EBUSY;
  }
  ch->bell.close(ch->ctx->host->arena());
  delete ch;
  return 0;
}

void channel_attach(Channel* ch, Cq* cq) {
  std::lock_guard g(ch->mu);
  ch->cqs.push_back(cq);
  ++ch->refcnt;
}

void channel_detach(Channel* ch, Cq* cq) {
  std::lock_guard g(ch->mu);
  ch->cqs.erase(std::remove(ch->cqs.begin(), ch->cqs.end(), cq), ch->cqs.end());
  ch->ready.erase(std::remove(ch->ready.begin(), ch->ready.end(), cq), ch->ready.end());
  --ch->refcnt;
}

int get_cq_event(Channel* ch, Cq** out, void** cq_context) {
  for (;;) {
    {
      std::lock_guard g(ch->mu);
      // Consume the wake-ups before looking at the flags: a wake-up that
      // arrives after this finds its flag still set (at worst a spurious
      // wake-up), while the reverse order could lose one.
      ch->bell.drain();
      for (Cq* cq : ch->cqs)
        if (cq->shared->event_pending.exchange(0, std::memory_order_acq_rel)) ch->ready.push_back(cq);
      if (!ch->ready.empty()) {
        Cq* cq = ch->ready.front();
        ch->ready.pop_front();
        // Keep the fd readable while events remain, for callers that poll()
        // the fd before each get_cq_event.
        if (!ch->ready.empty()) ch->bell.ring();
        pthread_mutex_lock(&cq->mutex);
        ++cq->events_reported;
        pthread_mutex_unlock(&cq->mutex);
        *out = cq;
        *cq_context = cq->cq_context;
        return 0;
      }
    }
    char buf[64];
    ssize_t r = ::read(ch->fd, buf, sizeof buf);  // sleeps here: no spinning
    if (r < 0) return -1;  // EAGAIN (non-blocking fd), EINTR: as libibverbs
  }
}

void ack_cq_events(Cq* cq, unsigned n) {
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += n;
  pthread_cond_broadcast(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

}  // namespace sv
