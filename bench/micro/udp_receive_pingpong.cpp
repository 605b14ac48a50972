// A UDP ping-pong between two processes on loopback, both sides spinning,
// received three ways: poll() then recv() (what softverbs does by default),
// an io_uring multishot recvmsg into a provided-buffer ring whose work
// waits for our next entry into the kernel (COOP_TASKRUN, the ring's
// TASKRUN flag read to know when to enter), and the same with the work
// deferred to io_uring_get_events (DEFER_TASKRUN). It answers whether
// receiving through io_uring pays on this machine before softverbs builds
// on it (transport/receive_watch.h).
//   udp_receive_pingpong [ROUNDS] [MESSAGES]
// Prints each way's round trip (median, 10th percentile) per round.
#include <liburing.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

enum class Way { kPollRecv, kUringCoop, kUringDeferred };
const char* name(Way w) {
  return w == Way::kPollRecv ? "poll+recv" : w == Way::kUringCoop ? "io_uring recvmsg (coop)" : "io_uring recvmsg (deferred)";
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Receives one datagram on `fd` the chosen way, spinning.
class Receiver {
 public:
  Receiver(Way way, int fd) : way_(way), fd_(fd) {
    if (way_ == Way::kPollRecv) return;
    io_uring_params p{};
    p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_TASKRUN_FLAG |
              (way_ == Way::kUringDeferred ? IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN
                                           : IORING_SETUP_COOP_TASKRUN);
    p.cq_entries = 256;
    if (const int rc = io_uring_queue_init_params(8, &ring_, &p); rc < 0) {
      std::fprintf(stderr, "io_uring: %s\n", std::strerror(-rc));
      std::exit(77);
    }
    register_buffers();
    storage_.resize(kBuffers * kBufferBytes);
    for (int i = 0; i < kBuffers; ++i) give_back(i);
    msg_.msg_namelen = sizeof(sockaddr_in);
    arm();
  }
  void wait_one(char* out) {
    for (;;) {
      if (way_ == Way::kPollRecv) {
        pollfd pfd{fd_, POLLIN, 0};
        if (poll(&pfd, 1, 0) > 0 && recv(fd_, out, 64, 0) > 0) return;
        continue;
      }
      if (IO_URING_READ_ONCE(*ring_.sq.kflags) & IORING_SQ_TASKRUN) io_uring_get_events(&ring_);
      io_uring_cqe* c;
      if (io_uring_peek_cqe(&ring_, &c) != 0) continue;
      const int buffer = static_cast<int>(c->flags >> IORING_CQE_BUFFER_SHIFT);
      const bool more = c->flags & IORING_CQE_F_MORE;
      const int res = c->res;
      io_uring_cqe_seen(&ring_, c);
      if (res > 0) {
        io_uring_recvmsg_out* o = io_uring_recvmsg_validate(&storage_[buffer * kBufferBytes], res, &msg_);
        if (o) std::memcpy(out, io_uring_recvmsg_payload(o, &msg_), 1);
        give_back(buffer);
      }
      if (!more) arm();
      if (res > 0) return;
    }
  }

 private:
  static constexpr int kBuffers = 64, kBufferBytes = 2048, kGroup = 1;
  void register_buffers() {
    // (Debian 12's liburing 2.3 has no io_uring_setup_buf_ring: by hand.)
    buffers_ = static_cast<io_uring_buf_ring*>(aligned_alloc(4096, 4096));
    io_uring_buf_ring_init(buffers_);
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<uint64_t>(buffers_);
    reg.ring_entries = kBuffers;
    reg.bgid = kGroup;
    if (io_uring_register_buf_ring(&ring_, &reg, 0) != 0) std::exit(77);
  }
  void give_back(int i) {
    io_uring_buf_ring_add(buffers_, &storage_[i * kBufferBytes], kBufferBytes, i, io_uring_buf_ring_mask(kBuffers), 0);
    io_uring_buf_ring_advance(buffers_, 1);
  }
  void arm() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    io_uring_prep_recvmsg_multishot(sqe, fd_, &msg_, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = kGroup;
    io_uring_submit(&ring_);
  }
  Way way_;
  int fd_;
  io_uring ring_{};
  io_uring_buf_ring* buffers_ = nullptr;
  std::vector<char> storage_;
  msghdr msg_{};
};

int bound_socket(sockaddr_in* addr) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
  addr->sin_family = AF_INET;
  addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr->sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(addr), sizeof *addr);
  socklen_t len = sizeof *addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(addr), &len);
  return fd;
}

void run(Way way, int messages) {
  sockaddr_in a{}, b{};
  const int fa = bound_socket(&a), fb = bound_socket(&b);
  const pid_t echo = fork();
  if (echo == 0) {
    Receiver rx(way, fb);
    char m[64];
    for (int i = 0; i < messages; ++i) {
      rx.wait_one(m);
      sendto(fb, m, 1, 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
    }
    _exit(0);
  }
  Receiver rx(way, fa);
  char m[64] = "x";
  usleep(100'000);
  std::vector<int64_t> rtt;
  rtt.reserve(messages);
  for (int i = 0; i < messages; ++i) {
    const int64_t t0 = now_ns();
    sendto(fa, m, 1, 0, reinterpret_cast<sockaddr*>(&b), sizeof b);
    rx.wait_one(m);
    rtt.push_back(now_ns() - t0);
  }
  waitpid(echo, nullptr, 0);
  close(fa);
  close(fb);
  std::sort(rtt.begin(), rtt.end());
  std::printf("%-28s round trip median %6.2f us, 10th percentile %6.2f us\n", name(way), rtt[rtt.size() / 2] / 1e3,
              rtt[rtt.size() / 10] / 1e3);
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  const int messages = argc > 2 ? std::atoi(argv[2]) : 20000;
  for (int r = 0; r < rounds; ++r)
    for (Way w : {Way::kPollRecv, Way::kUringCoop, Way::kUringDeferred}) run(w, messages);
}
