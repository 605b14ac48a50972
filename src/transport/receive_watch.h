// Whether a process's receiving descriptors (its UDP sockets, the
// forwarding socket or host service connection, the bells of its rings)
// may hold anything, learnt without a system call.
//
// An application thread polling an empty CQ drains the network itself
// (RoceTransport::progress). Asking the kernel each time whether anything
// came, with poll(), cost ~0.75 us per empty poll: a rank of a UCX or MPI job
// polls several CQs in a loop and spent its wait in the kernel. Here the
// descriptors are members of one epoll set, and an io_uring multishot poll
// on that set posts a completion to a ring in our memory whenever one of
// them is woken. An empty poll reads the ring's tail: one load. Only when a
// completion came (or the set changed) does the poller ask poll() which
// descriptor it was and drain it, as before.
//
// Who is woken. The ring's multishot poll belongs to the application thread
// that armed it. When a packet comes, the kernel raises a flag in the ring
// (in the sender's context: at once) and leaves the poll's work for that
// thread's next entry into the kernel, which the poll() that follows makes.
// Nobody is interrupted or woken for it (but the arming thread, if it
// sleeps elsewhere); the network thread keeps away from the sockets while
// an application polls (network_thread's naps). When it takes them over
// again (nobody polls), it cancels the ring's poll, so that a thread asleep
// elsewhere is not woken for every packet it no longer looks for; the next
// poll arms it again (one system call).
//
// The epoll set, not a poll per descriptor: a closed descriptor leaves an
// epoll set by itself, whereas a ring's poll on it would keep its socket
// open (and in its port's group, taking packets) until cancelled.
//
// Measured on this project's 2-vCPU machines, it does not pay: an empty
// poll is free, but each packet costs more (the poll's work, the epoll
// set's wake, one more look after the completion): ib_send_lat between two
// namespaces 1.2-1.7x the typical latency, a UDP ping-pong's round trip
// 0.7-1.7 us longer with recvmsg itself in the ring
// (bench/receive_watch_ab.sh). So it is opt-in,
// SOFTVERBS_IO_URING=1 (util/knobs.h), for machines where a system call
// costs more than here. Where io_uring cannot be had (a kernel without it,
// io_uring_disabled, a container's seccomp filter), open() fails and the
// caller asks poll() on every empty poll, as by default.
//
// Not thread-safe: every call but open() is made under the NIC's rx_mu.
#pragma once

#include <poll.h>

#include <cstddef>
#include <atomic>
#include <cstdint>
#include <memory>

namespace sv::roce {

class ReceiveWatch {
 public:
  static constexpr size_t kMaxMembers = 160;  // descriptors in the set

  ReceiveWatch();
  ~ReceiveWatch();
  ReceiveWatch(const ReceiveWatch&) = delete;
  ReceiveWatch& operator=(const ReceiveWatch&) = delete;

  // Sets up the epoll set and the ring; false (said at debug level) when
  // io_uring cannot be had or is switched off: is_open() stays false.
  bool open();
  bool is_open() const { return ring_ != nullptr; }

  // Whether the descriptors `fds[0..count)` may hold something, so that the
  // caller should poll() them: a completion came since the last call, or the
  // set is new (`epoch`, the wire's count of changes, moved or the
  // descriptors differ) or not watched yet, or the last drain may have left
  // something (drained(true)). False: nothing came; no system call made.
  bool maybe_readable(const pollfd* fds, size_t count, uint64_t epoch);
  // What the caller's poll() found: `more` when it drained something (a
  // drain is bounded: ask again next time), false when nothing was there.
  void drained(bool more) { recheck_ = more; }
  // Cancels the ring's poll (the network thread takes the sockets over);
  // the next maybe_readable() arms it again.
  void disarm();
  // In a fork()ed child: the ring and the set are the parent's. Forgets
  // them without touching them (the child opens its own).
  void drop_in_child();

  // Whether the ring's poll is armed (read by the network thread without
  // rx_mu: it disarms a poll nobody looks at any more).
  bool armed() const { return armed_.load(std::memory_order_relaxed); }
  // How many times the ring's poll was armed (a system call each).
  uint64_t arms() const { return arms_; }

 private:
  struct Ring;
  // Makes the epoll set hold exactly `fds` (system calls: only when it changed).
  void sync_set(const pollfd* fds, size_t count, uint64_t epoch);
  bool arm();

  std::unique_ptr<Ring> ring_;
  int epoll_fd_ = -1;
  // The set as last synced: its descriptors and the wire's epoch then.
  int members_[kMaxMembers];
  size_t member_count_ = 0;
  uint64_t epoch_ = ~uint64_t{0};
  std::atomic<bool> armed_{false};
  bool recheck_ = true;
  uint64_t generation_ = 0;  // of the armed poll; completions of older ones are stale
  uint64_t arms_ = 0;
};

}  // namespace sv::roce
