// Event channels: rdma_create_event_channel, rdma_destroy_event_channel,
// rdma_get_cm_event, rdma_ack_cm_event, and the event queue and epoll set
// behind them (see cm_state.h for the design).
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <unordered_map>

#include "c_boundary.h"
#include "cm_link.h"
#include "cm_state.h"
#include "util/private_heap.h"

namespace sv::rdmacm {
namespace {

// Every watched fd has a key; epoll reports the key, and a key that is no
// longer here (its id was destroyed after epoll_wait returned) is ignored.
PrivateUnorderedMap<uint64_t, Watch>& watches() {
  static auto* map = new_private<PrivateUnorderedMap<uint64_t, Watch>>();
  return *map;
}
uint64_t next_key = 1;

void set_ready(Channel* ch) {
  const uint64_t one = 1;
  if (ch->queue.size() == 1) (void)!write(ch->ready_fd, &one, sizeof one);
}

void clear_ready_if_empty(Channel* ch) {
  uint64_t value;
  if (ch->queue.empty()) (void)!read(ch->ready_fd, &value, sizeof value);
}

void dispatch(uint64_t key) {
  auto it = watches().find(key);
  if (it == watches().end()) return;
  Watch& watch = it->second;
  switch (watch.kind) {
    case WatchKind::kReady: break;
    case WatchKind::kListener: on_listener_readable(watch.id); break;
    case WatchKind::kListenMailbox: on_listen_mailbox_readable(watch.id); break;
    case WatchKind::kListenerWait: on_listener_wait_timer(watch.id); break;
    case WatchKind::kProcessMailbox: on_process_mailbox_readable(); break;
    case WatchKind::kRetryTimers: on_retry_timers(); break;
    case WatchKind::kRendezvous: on_rendezvous_readable(static_cast<Rendezvous*>(watch.object)); break;
    case WatchKind::kLocalMailbox: on_local_mailbox_readable(); break;
    case WatchKind::kLinkTimer: on_link_timer(); break;
  }
}

// Every shared watch with a channel, so a destroyed channel leaves them.
PrivateVector<SharedWatch*>& shared_watches() {
  static auto* list = new_private<PrivateVector<SharedWatch*>>();
  return *list;
}

// Turns what is readable on the channel into events. `timeout_ms` as for
// epoll_wait; called with the lock held, drops it while sleeping.
void pump(Channel* ch, CmLock& lock, int timeout_ms) {
  epoll_event ready[16];
  if (timeout_ms != 0) lock.unlock();
  int n = epoll_wait(ch->pub.fd, ready, 16, timeout_ms);
  if (timeout_ms != 0) lock.lock();
  for (int i = 0; i < n; ++i) dispatch(ready[i].data.u64);
}

bool is_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  return flags >= 0 && (flags & O_NONBLOCK);
}

}  // namespace

std::recursive_mutex& cm_mutex() {
  static auto* mutex = new_private<std::recursive_mutex>();
  return *mutex;
}

std::condition_variable_any& cm_acked() {
  static auto* cv = new_private<std::condition_variable_any>();
  return *cv;
}

Channel* channel_create() {
  auto ch = std::make_unique<Channel>();
  ch->pub.fd = epoll_create1(EPOLL_CLOEXEC);
  if (ch->pub.fd < 0) return nullptr;
  ch->ready_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (ch->ready_fd < 0) {
    int err = errno;
    close(ch->pub.fd);
    errno = err;
    return nullptr;
  }
  CmLock lock(cm_mutex());
  watch_add(ch.get(), WatchKind::kReady, ch->ready_fd, nullptr);
  return ch.release();
}

namespace {

void channel_free(Channel* ch) {
  close(ch->ready_fd);
  close(ch->pub.fd);
  delete ch;
}

}  // namespace

void channel_destroy(Channel* ch) {
  CmLock lock(cm_mutex());
  shared_watches_forget(ch);
  for (auto it = watches().begin(); it != watches().end();) {
    if (it->second.channel == ch) it = watches().erase(it);
    else ++it;
  }
  for (Event* ev : ch->queue) delete ev;
  ch->queue.clear();
  ch->destroyed = true;
  if (ch->waiters == 0) return channel_free(ch);
  const uint64_t one = 1;  // wakes the waiters' epoll_wait
  (void)!write(ch->ready_fd, &one, sizeof one);
}

namespace {

// `watch` in its channel's epoll set, waiting for `events`; its key, or 0.
uint64_t add_watch(const Watch& watch, uint32_t events) {
  uint64_t key = next_key++;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = key;
  if (epoll_ctl(watch.channel->pub.fd, EPOLL_CTL_ADD, watch.fd, &ev) != 0) return 0;
  watches().emplace(key, watch);
  return key;
}

}  // namespace

uint64_t watch_add(Channel* ch, WatchKind kind, int fd, Id* id) { return add_watch(Watch{kind, fd, id, ch}, EPOLLIN); }

void watch_remove(uint64_t& key) {
  if (!key) return;
  auto it = watches().find(key);
  if (it != watches().end()) {
    epoll_ctl(it->second.channel->pub.fd, EPOLL_CTL_DEL, it->second.fd, nullptr);
    watches().erase(it);
  }
  key = 0;
}

void watch_remove_and_close(uint64_t& key) {
  auto it = watches().find(key);
  int fd = it != watches().end() ? it->second.fd : -1;
  watch_remove(key);
  if (fd >= 0) close(fd);
}

void SharedWatch::attach(Channel* ch) {
  auto [it, added] = channels.try_emplace(ch, 0u, uint64_t{0});
  if (added) {
    it->second.second = add_watch(Watch{kind, fd, nullptr, ch, object}, events);
    if (channels.size() == 1) shared_watches().push_back(this);
  }
  ++it->second.first;
}

void SharedWatch::set_events(uint32_t epoll_events) {
  events = epoll_events;
  for (auto& [ch, use] : channels) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = use.second;
    epoll_ctl(ch->pub.fd, EPOLL_CTL_MOD, fd, &ev);
  }
}

void SharedWatch::detach(Channel* ch) {
  auto it = channels.find(ch);
  if (it == channels.end()) return;
  if (--it->second.first) return;
  watch_remove(it->second.second);
  channels.erase(it);
  if (channels.empty()) std::erase(shared_watches(), this);
}

void SharedWatch::detach_all() {
  for (auto& [ch, use] : channels) watch_remove(use.second);
  if (!channels.empty()) std::erase(shared_watches(), this);
  channels.clear();
}

void shared_watches_forget(Channel* ch) {
  for (SharedWatch* shared : PrivateVector<SharedWatch*>(shared_watches())) {
    auto it = shared->channels.find(ch);
    if (it == shared->channels.end()) continue;
    it->second.first = 1;
    shared->detach(ch);
  }
}

void watch_move(Id* id, Channel* from, Channel* to) {
  for (auto& [key, watch] : watches()) {
    if (watch.channel != from) continue;
    bool mine = watch.id == id && watch.kind != WatchKind::kReady;
    if (!mine) continue;
    epoll_ctl(from->pub.fd, EPOLL_CTL_DEL, watch.fd, nullptr);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = key;
    epoll_ctl(to->pub.fd, EPOLL_CTL_ADD, watch.fd, &ev);
    watch.channel = to;
  }
  for (auto it = from->queue.begin(); it != from->queue.end();) {
    if ((*it)->counted == id) {
      to->queue.push_back(*it);
      set_ready(to);
      it = from->queue.erase(it);
    } else {
      ++it;
    }
  }
  clear_ready_if_empty(from);
}

Event* queue_event(Id* id, rdma_cm_event_type type, int status) {
  auto* ev = new Event;
  ev->pub.id = &id->pub;
  ev->pub.event = type;
  ev->pub.status = status;
  ev->counted = id;
  ++id->events_reported;
  Channel* ch = channel_of(id->pub.channel);
  ch->queue.push_back(ev);
  set_ready(ch);
  return ev;
}

void drop_queued_events(Id* id) {
  Channel* ch = channel_of(id->pub.channel);
  if (!ch) return;
  for (auto it = ch->queue.begin(); it != ch->queue.end();) {
    if ((*it)->counted == id) {
      delete *it;
      ++id->events_acked;
      it = ch->queue.erase(it);
    } else {
      ++it;
    }
  }
  clear_ready_if_empty(ch);
}

int next_event(Channel* ch, Event** out) {
  CmLock lock(cm_mutex());
  const bool nonblocking = is_nonblocking(ch->pub.fd);
  link_resume_accepting();  // (once per call: a listener out of fds tries again)
  ++ch->waiters;
  for (;;) {
    if (ch->destroyed) {  // by another thread while this one slept
      if (--ch->waiters == 0) channel_free(ch);
      lock.unlock();
      // As with rdma-core, whose waiter stays in read() on the closed fd:
      // the thread never returns (rping's and cmtime's event threads would
      // report an error and exit the process). pause() is a cancellation
      // point, as read() is.
      for (;;) pause();
    }
    pump(ch, lock, 0);
    if (!ch->queue.empty()) {
      *out = ch->queue.front();
      ch->queue.pop_front();
      clear_ready_if_empty(ch);
      --ch->waiters;
      return 0;
    }
    if (nonblocking) {
      --ch->waiters;
      return fail(EAGAIN);
    }
    pump(ch, lock, -1);
  }
}

}  // namespace sv::rdmacm

using namespace sv::rdmacm;

extern "C" SOFTVERBS_RDMACM_EXPORT struct rdma_event_channel* rdma_create_event_channel(void) {
  return guarded<rdma_event_channel*>(nullptr, []() -> rdma_event_channel* {
    Channel* ch = channel_create();
    return ch ? &ch->pub : nullptr;
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel* channel) {
  if (!channel) return;
  const int saved_errno = errno;
  channel_destroy(channel_of(channel));
  errno = saved_errno;
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_get_cm_event(struct rdma_event_channel* channel,
                                                         struct rdma_cm_event** event) {
  if (!channel || !event) return fail(EINVAL);
  return guarded(-1, [&] {
    Event* ev = nullptr;
    if (next_event(channel_of(channel), &ev) != 0) return -1;
    *event = &ev->pub;
    return 0;
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_ack_cm_event(struct rdma_cm_event* event) {
  if (!event) return fail(EINVAL);
  auto* ev = reinterpret_cast<Event*>(event);
  CmLock lock(cm_mutex());
  if (ev->counted) ++ev->counted->events_acked;
  delete ev;
  cm_acked().notify_all();
  return 0;
}
