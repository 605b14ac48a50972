// This process's rings to other users' processes of this host (one pair
// per peer slot: shm/peer_ring.h, made by the host service,
// hostd::ChannelOpen). A datagram for another user's QP on this host goes
// into the peer's ring instead of the kernel's UDP stack; what comes out of
// a ring is from that peer's slot, which the service attests. Until the
// rings come, datagrams go by UDP, from a port the service vouches for.
//
// Threads: senders (the engine's two streams, any thread) take a channel's
// lock to write; the receiving side (drain, under the NIC's rx_mu) reads;
// channels open and close on the thread that holds rx_mu. A closed
// channel's rings are let go under its lock and rx_mu both; the small
// Channel itself is kept (a sender may still hold a pointer to it, and finds
// it closed).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "shm/layout.h"
#include "shm/peer_ring.h"
#include "transport/roce_socket.h"
#include "util/brief_spin_mutex.h"
#include "util/private_heap.h"

namespace sv::roce {

class PeerChannels : public PrivateHeapObject {
 public:
  PeerChannels() = default;
  PeerChannels(const PeerChannels&) = delete;
  PeerChannels& operator=(const PeerChannels&) = delete;
  ~PeerChannels() = default;

  // Opens the channel to `peer` with the service's descriptors (ring out,
  // ring in, the bell to ring, the bell to watch), which it takes. Under
  // rx_mu.
  void open(uint32_t peer, pid_t peer_pid, const int* fds, int count);
  // Closes it (its process is gone). Under rx_mu. Its bells are closed by
  // close_retired: the network thread may be watching them.
  void close(uint32_t peer);
  // The bells to watch (the network thread's poll): up to `max` into fds[].
  size_t bells(int* fds, size_t max) const;
  // Closes the bells of closed channels. The network thread, under rx_mu,
  // when it watches none.
  void close_retired();
  // Whether a ring to `peer` is open.
  bool open_to(uint32_t peer) const { return peer < shm::kMaxProcs && channels_[peer].load(std::memory_order_acquire); }
  // True the first time for `peer` since it was last closed: ask the
  // service then.
  bool note_asked(uint32_t peer);

  // Puts `d` (to this host, for `peer`'s QP) into the ring; false when no
  // channel is open to `peer`. A full ring loses the datagram, as a wire
  // would (reliable messages go again).
  bool put(uint32_t peer, const OutDatagram& d, uint16_t src_port);
  // Makes what put() wrote visible, and rings the bells of peers that may
  // be asleep. Returns how many datagrams a full ring lost since the last call.
  uint64_t publish();

  // Whether any ring holds something for us (loads, no system call). Under rx_mu.
  bool any_ready() const;
  // Takes up to `max` datagrams from the rings: fn(peer, record, data,
  // len) for each (data in `buf` + i * stride, kDatagramHeadroom before
  // each); returns how many. Under rx_mu.
  template <typename Fn>
  int take(uint8_t* buf, size_t stride, size_t headroom, int max, Fn fn);
  // Rings one of our own bells: the rings hold more than a drain's budget
  // took, and nothing else would wake the network thread for the rest (a
  // peer rings only after we emptied its ring). Under rx_mu.
  void ring_own_bell();
  // Channels whose peer process is gone (no service told us: it was away)
  // are closed. Under rx_mu.
  void forget_dead_peers();
  // Rings asked of a service that is gone, and never made: to be asked of
  // the next one (note_asked is true again). Under rx_mu.
  void forget_unanswered_asks();
  // A fork()ed child has none of these (the rings are the parent's).
  void drop_in_child();

 private:
  struct Channel : PrivateHeapObject {
    uint32_t peer = 0;
    pid_t peer_pid = 0;
    int bell_out = -1;              // rung when we put into a ring the peer had emptied (under mu)
    std::atomic<int> bell_in{-1};   // the peer rings it (watched by our network thread)
    BriefSpinMutex mu;  // the writer's
    shm::PeerRingWriter out;
    shm::PeerRingReader in;
    bool dirty = false;   // put() since the last publish (under mu)
    bool closed = false;  // (under mu)
    uint64_t lost = 0;    // (under mu)
  };
  // The slots with a channel open, a bit each: the loops over channels (a
  // poll's bells, every publish and drain) visit those alone, not every
  // slot of the host (they took ~5% of both ends' time at 1 KiB packets).
  static constexpr uint32_t kOpenWords = (shm::kMaxProcs + 63) / 64;
  template <typename Fn>
  void for_each_open(Fn fn) const {
    for (uint32_t w = 0; w < kOpenWords; ++w)
      for (uint64_t bits = open_bits_[w].load(std::memory_order_acquire); bits; bits &= bits - 1) {
        const uint32_t peer = w * 64 + static_cast<uint32_t>(__builtin_ctzll(bits));
        if (Channel* c = channels_[peer].load(std::memory_order_acquire))
          if (!fn(peer, c)) return;
      }
  }

  std::atomic<Channel*> channels_[shm::kMaxProcs] = {};
  std::atomic<uint64_t> open_bits_[kOpenWords] = {};
  std::atomic<bool> asked_[shm::kMaxProcs] = {};
  std::atomic<uint32_t> open_count_{0};
  std::atomic<bool> dirty_hint_{false};  // put() since publish() last looked
  PrivateVector<int> retired_;           // bells of closed channels (under rx_mu)
};

template <typename Fn>
int PeerChannels::take(uint8_t* buf, size_t stride, size_t headroom, int max, Fn fn) {
  if (!open_count_.load(std::memory_order_acquire)) return 0;
  int got = 0;
  for_each_open([&](uint32_t p, Channel* c) {
    if (!c->in.ready()) return true;
    // Until the ring is seen empty after our release: the producer rings
    // the bell only when it sees we had taken everything before its
    // publish (PeerRingWriter::publish), so what it published between our
    // last take and our release is ours to see now, or we would sleep on
    // it (both ends' QPs then ran out of retries).
    do {
      while (got < max) {
        shm::PeerRecord r;
        uint8_t* at = buf + static_cast<size_t>(got) * stride;
        const ssize_t n = c->in.take(&r, at + headroom);
        if (n < 0) break;
        fn(p, r, at, static_cast<size_t>(n));
        ++got;
      }
      c->in.release();
    } while (got < max && c->in.ready());
    return got < max;
  });
  return got;
}

}  // namespace sv::roce
