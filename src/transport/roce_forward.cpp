#include "transport/roce_forward.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "shm/runtime_dir.h"
#include "util/clock.h"
#include "util/knobs.h"
#include "util/log.h"
#include "util/peer_credentials.h"
#include "util/unix_socket_address.h"

namespace sv {
namespace {

// What the owner saw of the datagram, ahead of its bytes.
struct ForwardHeader {
  in6_addr src, dst;
  uint16_t src_port, dst_port;
  uint8_t traffic_class, hop_limit;
  uint16_t seg;  // 0: one datagram; else a GRO buffer's segment size
};

}  // namespace

// The socket of the process of registry slot `slot`. In the user's own
// domain: a file in its runtime directory (shm/runtime_dir.h), which no
// other user can bind first (and so receive what we forward) or send to;
// the network namespace is part of the name, as the port is per namespace.
// In a domain named on purpose (shared by whoever names it), or when that
// path would be too long, an abstract name per domain, in the namespace.
sockaddr_un Forwarder::address_of(uint32_t slot, socklen_t* len) const {
  return user_unix_address(dir_, file_prefix_ + std::to_string(slot), abstract_prefix_ + std::to_string(slot), len);
}

bool Forwarder::open(uint32_t slot) {
  // Where the sockets are, worked out once: forward() runs per packet.
  const Knobs& k = knobs();
  dir_ = k.domain_named ? "" : shm::runtime_dir();
  file_prefix_ = "roce-" + std::to_string(own_netns_inode()) + "-";
  abstract_prefix_ = "softverbs-" + k.domain + "-roce-";
  // A unix datagram queue holds only net.unix.max_dgram_qlen (10) datagrams:
  // a burst waits a little for the receiver rather than being lost, but
  // never long (a stopped process must not stall everyone's packets).
  send_fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (send_fd_ < 0) return false;
  timeval wait{0, 20'000};
  setsockopt(send_fd_, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof wait);
  fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) return false;
  socklen_t len;
  const sockaddr_un a = address_of(slot, &len);
  int size = 4 << 20;
  setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  // Any user of the network namespace can send to an abstract name: the
  // kernel's word on each sender decides (receive drops other users').
  // A file left by the slot's previous owner (killed) goes: the slot, and
  // so the name, is ours now.
  if (a.sun_path[0]) unlink(a.sun_path);
  if (!pass_credentials(fd_) || bind(fd_, reinterpret_cast<const sockaddr*>(&a), len) != 0) {
    ::close(fd_);
    fd_ = -1;
    return false;
  }
  if (a.sun_path[0]) bound_path_ = a.sun_path;
  return true;
}

void Forwarder::remove_name() {
  if (!bound_path_.empty()) unlink(bound_path_.c_str());
  bound_path_.clear();
}

void Forwarder::close() {
  if (fd_ >= 0) ::close(fd_);
  if (send_fd_ >= 0) ::close(send_fd_);
  fd_ = send_fd_ = -1;
  bound_path_.clear();
}

bool Forwarder::forward(uint32_t slot, const DatagramInfo& info, uint16_t dst_port, const uint8_t* data,
                        size_t len, uint16_t seg) {
  if (send_fd_ < 0) return false;
  ForwardHeader h{info.src, info.dst, info.src_port, dst_port, info.traffic_class, info.hop_limit, seg};
  socklen_t alen;
  sockaddr_un a = address_of(slot, &alen);
  iovec iov[2] = {{&h, sizeof h}, {const_cast<uint8_t*>(data), len}};
  msghdr msg{};
  msg.msg_name = &a;
  msg.msg_namelen = alen;
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  // A burst waits for room in the receiver's short queue (SO_SNDTIMEO)
  // unless a wait just ran out: two processes that forward to each other,
  // each waiting for the other to read, would otherwise stall a whole
  // timeout per packet. For a while after one, what finds no room is lost
  // at once, as on a wire (RC sends it again), and this thread goes back
  // to reading its own queue.
  const bool wait = monotonic_ns() >= congested_until_ns_;
  for (;;) {
    ssize_t n = sendmsg(send_fd_, &msg, wait ? 0 : MSG_DONTWAIT);
    if (n == static_cast<ssize_t>(sizeof h + len)) return true;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && wait && (errno == EAGAIN || errno == EWOULDBLOCK)) congested_until_ns_ = monotonic_ns() + kCongestedNs;
    return false;  // gone, or not reading: lost, as on a wire
  }
}

ssize_t Forwarder::receive(uint8_t* buf, size_t cap, DatagramInfo* info, uint16_t* dst_port, uint16_t* seg) {
  if (fd_ < 0) return -1;
  for (;;) {
    ForwardHeader h;
    iovec iov[2] = {{&h, sizeof h}, {buf, cap}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    CredentialsBuffer creds;
    creds.attach(&msg);
    ssize_t n = recvmsg(fd_, &msg, MSG_DONTWAIT);
    if (n < 0) return -1;
    if (const uint32_t uid = sender_uid(&msg); !is_trusted_uid(uid)) {
      // Another user's process injecting packets as if from the wire.
      ++foreign_;
      if (foreign_ == 1) SV_WARN("RoCEv2: dropped a datagram forwarded by uid %u, not ours", uid);
      continue;
    }
    if (n < static_cast<ssize_t>(sizeof h) || (msg.msg_flags & MSG_TRUNC)) continue;
    info->src = h.src;
    info->dst = h.dst;
    info->src_port = h.src_port;
    info->traffic_class = h.traffic_class;
    info->hop_limit = h.hop_limit;
    *dst_port = h.dst_port;
    *seg = h.seg;
    return n - static_cast<ssize_t>(sizeof h);
  }
}

}  // namespace sv
