#include "transport/receive_watch.h"

#include <liburing.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/log.h"

namespace sv::roce {

namespace {

// Room for the completions of a burst of wakes between two looks (each
// packet that wakes a socket may post one); more are kept by the kernel
// (IORING_FEAT_NODROP) and brought in by the next look.
constexpr unsigned kCompletions = 256;
// The user data of a cancel's own completion (polls count from 1).
constexpr uint64_t kCancelTag = 0;

}  // namespace

struct ReceiveWatch::Ring {
  io_uring ring{};
};

ReceiveWatch::ReceiveWatch() = default;

ReceiveWatch::~ReceiveWatch() {
  if (ring_) io_uring_queue_exit(&ring_->ring);
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

bool ReceiveWatch::open() {
  if (ring_) return true;
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return false;
  auto ring = std::make_unique<Ring>();
  io_uring_params params{};
  // The poll's work waits for the arming thread's next entry into the
  // kernel (COOP_TASKRUN) and raises a flag in the ring meanwhile
  // (TASKRUN_FLAG), which a look reads. By default the kernel would
  // interrupt that thread at once to run it: on a virtual machine here,
  // ~55 us from a packet to its completion, against ~8 us for poll().
  // (Both flags since Linux 5.19; Debian 12 has 6.1.)
  params.flags = IORING_SETUP_CQSIZE | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
  params.cq_entries = kCompletions;
  if (const int rc = io_uring_queue_init_params(4, &ring->ring, &params); rc < 0) {
    // (ENOSYS: no io_uring; EPERM: io_uring_disabled or seccomp; EINVAL:
    // older than 5.19.)
    SV_DEBUG("no io_uring (%s): an empty poll asks the kernel with poll()", strerror(-rc));
    close(epoll_fd_);
    epoll_fd_ = -1;
    return false;
  }
  ring_ = std::move(ring);
  return true;
}

void ReceiveWatch::sync_set(const pollfd* fds, size_t count, uint64_t epoch) {
  bool same = epoch == epoch_ && count == member_count_;
  for (size_t i = 0; same && i < count; ++i) same = fds[i].fd == members_[i];
  if (same) return;
  // (Rare: a socket, ring or service came or went. A descriptor closed
  // since has left the set by itself; its number may now be another's.)
  for (size_t i = 0; i < member_count_; ++i)
    if (members_[i] >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, members_[i], nullptr);
  member_count_ = std::min(count, kMaxMembers);
  for (size_t i = 0; i < member_count_; ++i) {
    members_[i] = fds[i].fd;
    if (members_[i] < 0) continue;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = members_[i];
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, members_[i], &ev) < 0 && errno != EEXIST)
      SV_DEBUG("receive watch: descriptor %d not watched: %s", members_[i], strerror(errno));
  }
  epoch_ = epoch;
  recheck_ = true;
}

bool ReceiveWatch::arm() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_->ring);
  if (!sqe) return false;
  ++generation_;
  io_uring_prep_poll_multishot(sqe, epoll_fd_, POLLIN);
  io_uring_sqe_set_data64(sqe, generation_);
  if (io_uring_submit(&ring_->ring) < 0) return false;
  armed_ = true;
  ++arms_;

  return true;
}

bool ReceiveWatch::maybe_readable(const pollfd* fds, size_t count, uint64_t epoch) {
  sync_set(fds, count, epoch);
  bool look = recheck_;
  if (!armed_) {
    // Armed now: what came before is not announced. (A failed arm leaves
    // the caller looking each time, as without a ring.)
    arm();
    look = true;
  }
  // A descriptor was woken: the poll's work waits for the arming thread to
  // enter the kernel (the caller's poll() does, if it is that thread; its
  // completion then comes too, and costs one more look). Another thread
  // sees the flag up until then, and looks each time, as without a ring.
  if (IO_URING_READ_ONCE(*ring_->ring.sq.kflags) & IORING_SQ_TASKRUN) look = true;
  io_uring_cqe* cqes[32];
  for (;;) {
    const unsigned got = io_uring_peek_batch_cqe(&ring_->ring, cqes, 32);
    if (!got) break;
    for (unsigned i = 0; i < got; ++i) {
      if (io_uring_cqe_get_data64(cqes[i]) != generation_) continue;  // a cancelled poll's, or a cancel's
      look = true;
      // A multishot poll ends when the kernel could not post (the ring
      // was full) or failed: armed again at the next look.
      if (!(cqes[i]->flags & IORING_CQE_F_MORE)) armed_ = false;
    }
    io_uring_cq_advance(&ring_->ring, got);
    if (got < 32) break;
  }
  return look;
}

void ReceiveWatch::disarm() {
  if (!armed_) return;
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_->ring);
  if (!sqe) return;
  io_uring_prep_poll_remove(sqe, generation_);
  io_uring_sqe_set_data64(sqe, kCancelTag);
  ++generation_;  // (the cancelled poll's last completion is stale)
  armed_ = false;
  recheck_ = true;  // the network thread may leave something behind when it hands back
  (void)io_uring_submit(&ring_->ring);
}

void ReceiveWatch::drop_in_child() {
  // The child's mappings of the parent's ring are its own to drop; the
  // ring itself lives on in the parent.
  if (ring_) io_uring_queue_exit(&ring_->ring);
  ring_.reset();
  if (epoll_fd_ >= 0) close(epoll_fd_);
  epoll_fd_ = -1;
  member_count_ = 0;
  epoch_ = ~uint64_t{0};
  armed_ = false;
  recheck_ = true;
}

}  // namespace sv::roce
