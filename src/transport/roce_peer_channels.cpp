#include "transport/roce_peer_channels.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>

#include "util/log.h"

namespace sv::roce {

void PeerChannels::open(uint32_t peer, pid_t peer_pid, const int* fds, int count) {
  if (count != 4) {
    for (int i = 0; i < count; ++i) ::close(fds[i]);
    return;
  }
  auto* c = new Channel;
  c->peer = peer;
  c->peer_pid = peer_pid;
  c->bell_out = fds[2];
  c->bell_in.store(fds[3]);
  const bool ok = peer && peer < shm::kMaxProcs && c->out.map(fds[0]) && c->in.map(fds[1]);
  ::close(fds[0]);
  ::close(fds[1]);
  if (!ok) {
    SV_WARN("rings to slot %u: not usable (%s); its datagrams go by UDP", peer, strerror(errno));
    ::close(c->bell_out);
    ::close(c->bell_in.load());
    delete c;  // (never published: no one else has it)
    return;
  }
  close(peer);  // (a previous process of that slot's)
  // (The bit first: a sender that finds the channel must find it in the
  // loop of its publish(), or what it put would wait for the next put.)
  open_bits_[peer / 64].fetch_or(uint64_t{1} << (peer % 64), std::memory_order_acq_rel);
  channels_[peer].store(c, std::memory_order_release);
  open_count_.fetch_add(1, std::memory_order_acq_rel);
  SV_DEBUG("rings to slot %u (pid %d) open: its datagrams go through shared memory", peer, peer_pid);
}

void PeerChannels::close(uint32_t peer) {
  if (!peer || peer >= shm::kMaxProcs) return;
  asked_[peer].store(false, std::memory_order_relaxed);
  Channel* c = channels_[peer].exchange(nullptr, std::memory_order_acq_rel);
  if (!c) return;
  open_bits_[peer / 64].fetch_and(~(uint64_t{1} << (peer % 64)), std::memory_order_acq_rel);
  open_count_.fetch_sub(1, std::memory_order_acq_rel);
  std::lock_guard g(c->mu);
  c->closed = true;
  c->out.unmap();
  c->in.unmap();
  retired_.push_back(c->bell_out);
  retired_.push_back(c->bell_in.exchange(-1));
  c->bell_out = -1;
  // (c is not freed: a sender may hold it still. A few dozen bytes per
  // peer process that ended.)
}

size_t PeerChannels::bells(int* fds, size_t max) const {
  size_t n = 0;
  for_each_open([&](uint32_t, const Channel* c) {
    const int fd = c->bell_in.load(std::memory_order_acquire);
    if (fd >= 0 && n < max) fds[n++] = fd;
    return n < max;
  });
  return n;
}

void PeerChannels::ring_own_bell() {
  for_each_open([](uint32_t, const Channel* c) {
    const int fd = c->bell_in.load(std::memory_order_acquire);
    if (fd < 0) return true;
    const uint64_t one = 1;
    (void)!write(fd, &one, sizeof one);
    return false;
  });
}

void PeerChannels::close_retired() {
  for (int fd : retired_) ::close(fd);
  retired_.clear();
}

bool PeerChannels::note_asked(uint32_t peer) {
  return peer && peer < shm::kMaxProcs && !asked_[peer].exchange(true, std::memory_order_relaxed);
}

bool PeerChannels::put(uint32_t peer, const OutDatagram& d, uint16_t src_port) {
  if (peer >= shm::kMaxProcs) return false;
  Channel* c = channels_[peer].load(std::memory_order_acquire);
  if (!c) return false;
  shm::PeerRecord r;
  r.len = static_cast<uint32_t>(d.len);
  r.traffic_class = d.traffic_class;
  r.src_port = src_port;
  r.src = d.src;
  r.dst = d.dst;
  std::lock_guard g(c->mu);
  if (c->closed) return false;
  if (c->out.put(r, d.data)) c->dirty = true;
  else ++c->lost;
  dirty_hint_.store(true, std::memory_order_relaxed);
  return true;
}

uint64_t PeerChannels::publish() {
  if (!dirty_hint_.exchange(false, std::memory_order_acq_rel)) return 0;
  uint64_t lost = 0;
  // (A channel closed meanwhile is skipped: what it held is lost with it.)
  for_each_open([&](uint32_t, Channel* c) {
    std::lock_guard g(c->mu);
    lost += std::exchange(c->lost, 0);
    if (!c->dirty || c->closed) return true;
    c->dirty = false;
    if (c->out.publish()) {  // it had taken all we had given it: it may be asleep
      const uint64_t one = 1;
      (void)!write(c->bell_out, &one, sizeof one);
    }
    return true;
  });
  return lost;
}

bool PeerChannels::any_ready() const {
  bool ready = false;
  for_each_open([&](uint32_t, const Channel* c) { return !(ready = c->in.ready()); });
  return ready;
}

void PeerChannels::forget_dead_peers() {
  PrivateVector<uint32_t> gone;
  for_each_open([&](uint32_t p, const Channel* c) {
    if (c->peer_pid > 0 && kill(c->peer_pid, 0) != 0 && errno == ESRCH) gone.push_back(p);
    return true;
  });
  for (uint32_t p : gone) {
    SV_DEBUG("rings to slot %u: its process is gone", p);
    close(p);
  }
}

void PeerChannels::forget_unanswered_asks() {
  for (uint32_t p = 1; p < shm::kMaxProcs; ++p)
    if (!channels_[p].load(std::memory_order_acquire)) asked_[p].store(false, std::memory_order_relaxed);
}

void PeerChannels::drop_in_child() {
  // (The rings stay mapped in the child: another thread of the parent may
  // have been in them; only our pointers and the bells go.)
  for (auto& slot : channels_)
    if (Channel* c = slot.exchange(nullptr)) {
      ::close(c->bell_out);
      ::close(c->bell_in.load());
    }
  for (auto& w : open_bits_) w.store(0);
  for (auto& a : asked_) a.store(false);
  open_count_.store(0);
  close_retired();
}

}  // namespace sv::roce
