#include "core/link_watch.h"

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <new>
#include <set>
#include <span>
#include <thread>
#include <vector>

#include "core/async_events.h"
#include "core/context.h"
#include "core/device_attr.h"
#include "core/gid_table.h"
#include "util/log.h"
#include "util/private_heap.h"

namespace sv::link_watch {
namespace {

struct Watch : PrivateHeapObject {
  std::mutex mu;
  PrivateSet<Context*> contexts;
  PrivateVector<GidEntry> gids;  // the table the contexts were last told about
  bool started = false;
};

std::atomic<bool> g_forced_down{false};  // (force_down)

Watch& watch() {
  static Watch* w = new Watch;  // outlives static destructors: its thread is detached
  return *w;
}

bool same_gids(std::span<const GidEntry> a, std::span<const GidEntry> b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!gid_equal(a[i].gid, b[i].gid)) return false;
  return true;
}

// Compares the host's addresses with what the contexts were told last.
void recheck() {
  // (Unreadable, e.g. the process at its file limit: no news, rather than
  // every GID gone and the port down.)
  std::optional<PrivateVector<GidEntry>> read = try_read_gid_table();
  if (!read) return;
  PrivateVector<GidEntry> now = std::move(*read);
  Watch& w = watch();
  std::lock_guard g(w.mu);
  if (same_gids(now, w.gids)) {
    // Same GIDs; an interface's MTU may have changed, and with it the
    // port's active MTU: rxe follows it (NETDEV_CHANGEMTU) with no event.
    const ibv_mtu before = port_active_mtu(w.gids), after = port_active_mtu(now);
    w.gids = std::move(now);
    if (before != after) {
      SV_INFO("port 1: active MTU %u -> %u (the link's MTU changed)", ib_mtu_bytes(before), ib_mtu_bytes(after));
      for (Context* ctx : w.contexts) ctx->forget_gids();
    }
    return;
  }
  const bool was_active = !w.gids.empty(), active = !now.empty();
  w.gids = std::move(now);
  SV_INFO("port 1: GID table changed (%zu entries)%s", w.gids.size(),
          was_active == active ? "" : active ? ", port ACTIVE" : ", port DOWN");
  for (Context* ctx : w.contexts) {
    ctx->forget_gids();
    raise_async_local(ctx, IBV_EVENT_GID_CHANGE, shm::kAsyncPort, 1);
    if (was_active != active && !g_forced_down.load(std::memory_order_relaxed))  // (held down: no change seen)
      raise_async_local(ctx, active ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR, shm::kAsyncPort, 1);
  }
}

void listen_loop(int fd) {
  pthread_setname_np(pthread_self(), "softverbs-link");
  char buf[8192];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);  // sleeps until the kernel says something
    if (n < 0 && errno != EINTR && errno != ENOBUFS) return;  // ENOBUFS: we missed some, recheck anyway
    while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
    }  // a burst of announcements: one look at the table is enough
    recheck();
  }
}

void start_locked(Watch& w) {
  if (w.started) return;
  static bool atfork = (pthread_atfork(nullptr, nullptr,
                                       [] {
                                         // The child has no watcher thread and none of the parent's contexts.
                                         Watch& c = watch();
                                         new (&c.mu) std::mutex;
                                         c.contexts.clear();
                                         c.started = false;
                                       }),
                        true);
  (void)atfork;
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) {
    SV_INFO("no netlink socket (%s): port and GID change events will not be raised", strerror(errno));
    return;
  }
  sockaddr_nl addr{};
  addr.nl_family = AF_NETLINK;
  addr.nl_groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    SV_INFO("netlink bind failed (%s): port and GID change events will not be raised", strerror(errno));
    close(fd);
    return;
  }
  w.gids = read_gid_table();
  w.started = true;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // signals stay with the application's threads
  std::thread(listen_loop, fd).detach();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace

void add(Context* ctx) {
  Watch& w = watch();
  std::lock_guard g(w.mu);
  w.contexts.insert(ctx);
  start_locked(w);
}

void remove(Context* ctx) {
  Watch& w = watch();
  std::lock_guard g(w.mu);
  w.contexts.erase(ctx);
}

void force_down(bool down) {
  Watch& w = watch();
  std::lock_guard g(w.mu);
  if (g_forced_down.exchange(down) == down || w.gids.empty()) return;  // (no change, or down anyway)
  SV_INFO("port 1: %s (fault injected)", down ? "DOWN" : "ACTIVE again");
  for (Context* ctx : w.contexts) raise_async_local(ctx, down ? IBV_EVENT_PORT_ERR : IBV_EVENT_PORT_ACTIVE, shm::kAsyncPort, 1);
}

bool forced_down() { return g_forced_down.load(std::memory_order_relaxed); }

}  // namespace sv::link_watch
