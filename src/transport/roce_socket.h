// The UDP sockets RoCEv2 packets travel through: one IPv4 and one IPv6
// socket on the RoCE port 4791 when this process owns the port in its
// network namespace, else on an ephemeral port (sending only: RoCE peers
// answer to 4791); sends leave from a port of the process's own, so that
// our processes' flows are distinct (roce_steering.h). Sends set the source address per packet (the QP's source
// GID) and DF, so the IP ID is 0 and the ICRC is known in advance
// (net/roce_datagram.h). Receives report both addresses, which the ICRC and
// a UD receiver's GRH need.
#pragma once

#include <netinet/in.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <string>

namespace sv {

// One datagram ready to go (RoceSocket::send_many).
struct OutDatagram {
  in6_addr src{}, dst{};
  uint16_t dst_port = 0;
  uint8_t traffic_class = 0;
  uint8_t* data = nullptr;  // writable: a GSO segment's ICRC is patched for its IP ID
  size_t len = 0;
  // Built without its ICRC, for a ring (Wire::through_memory); kDatagramHeadroom
  // bytes before `data` are ours, to seal it if it goes by UDP after all.
  bool unsealed = false;
  // The socket it leaves by, whose port its ICRC covers: 0, this process's
  // own (source_port), or the lane of its destination's process
  // (RoceSocket::lane_port).
  uint8_t lane = 0;
};

struct DatagramInfo {
  in6_addr src{}, dst{};  // IPv4 as ::ffff:a.b.c.d
  uint16_t src_port = 0;
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 64;
  uint32_t ifindex = 0;  // the interface it arrived on (IP_PKTINFO), when received from a socket
};

// A UDP socket on the RoCE port at `local` (shared with our other
// processes' sockets) connected to `remote` port `remote_port`: the kernel
// gives it that flow's packets and no other's (roce_steering.h). -1 (errno)
// when it cannot be had.
int connected_roce_socket(const in6_addr& local, const in6_addr& remote, uint16_t remote_port);

// A UDP socket of `family` on the RoCE port, joining the reuseport group
// of its uid there, set up as every receiving RoCE socket is (buffers, GRO,
// the control messages receive_many reads); -1 (errno) on failure. The
// host service makes one per process (tools/hostd/kernel_steering.h).
int roce_member_socket(int family);

// Who holds UDP `port` in this network namespace, from /proc/net/udp{,6}
// (the uid and socket inode columns): "uid N", "the kernel" (a socket
// with no inode: rxe's), or "" when it is not listed.
std::string udp_port_holder(uint16_t port);

// The largest IB MTU (256..4096) whose packets fit the link that leads to
// `dst` (a group: the link of `src`), as rxe derives its port MTU from the
// netdev's (headers allowed for); 1024 when the route is unknown.
uint32_t link_ib_mtu(const in6_addr& dst, const in6_addr& src);
// The index of the interface that has address `addr`; 0 when none has.
unsigned interface_of(const in6_addr& addr);
// An address of this host: one of its interfaces', or any loopback address.
// A datagram from one can come from any local user. (Any address is kept
// for a second, per thread: one look is a few comparisons.)
bool is_local_address(const in6_addr& addr);
// Whether a received datagram was sent by a process of this host: it came
// in over loopback (an unprivileged process can send IPv6 from an address
// not its host's, with IPV6_FREEBIND: only the way in tells), or from an
// address of this host (the kernel drops one from the wire with a local
// source as a martian). Else it came from the wire, from another host.
bool sent_by_this_host(const DatagramInfo& info);

class RoceSocket {
 public:
  RoceSocket() = default;
  RoceSocket(const RoceSocket&) = delete;
  RoceSocket& operator=(const RoceSocket&) = delete;
  ~RoceSocket() { close(); }

  // Opens both sockets; on the RoCE port if `roce_port` and it is free
  // (shared with our own processes), else on an ephemeral port. False
  // (errno set) when not even an ephemeral socket could be had.
  bool open(bool roce_port = true);
  // The host service's sockets (tools/hostd): the RoCE port, not shared
  // with anyone (no SO_REUSEPORT). False (errno set) when it is taken.
  bool open_exclusive();
  // Receives on `recv4` and `recv6` (either may be -1: none), sockets made
  // elsewhere (the host service's members of its port's groups), which it
  // now owns, and sends from ports of its own. False (errno) when it has
  // no socket to send from.
  bool adopt(int recv4, int recv6);
  // Receives on `recv4` and `recv6` from now on (-1: none), closing the
  // sockets it received on; sends as before.
  void replace_receivers(int recv4, int recv6);
  // Lets the RoCE port go (a host service came and needs it): receives on
  // nothing until replace_receivers, sends from ports of its own.
  void release_port();
  void close();
  // In a fork()ed child, after close(): a lock another thread of the
  // parent held is free.
  void drop_in_child() { new (&lanes_mu_) std::mutex(); }
  // Binds the RoCE port if its owner is gone (transport/roce_forward.h).
  bool try_own();
  // Stops new flows from being given to this process's sockets (a connected
  // member of a reuseport group only gets its own peer's packets); what is
  // queued can still be read.
  void leave_group();
  bool owns_roce_port() const { return owns_port_; }
  // This process's UDP source port for `dst`'s family: a port of its own
  // (not 4791, which all our processes share).
  uint16_t source_port(const in6_addr& dst) const;
  // The UDP source port of datagrams to `dst` that leave by `lane` (1..255:
  // a socket of their own, opened at its first datagram; 0: source_port).
  // A peer host's processes share their port, and the kernel brings each
  // flow (addresses and ports) to one of them, which forwards what is for
  // the others until they have the flow brought to themselves
  // (roce_steering.h); a flow carrying packets for two of them stays
  // forwarded. So our datagrams to each of a host's processes (the slot
  // their DestQP carries) leave by a port of their own, as a NIC's leave by
  // a port of their QP's. Where no socket can be had, source_port.
  uint16_t lane_port(const in6_addr& dst, uint8_t lane);
  // The port fd4() (v4) or fd6() receives on: 4791, or an ephemeral one
  // while another program holds it.
  uint16_t receive_port(bool v4) const;
  int fd4() const { return fd4_; }
  int fd6() const { return fd6_; }
  // The socket datagrams of `v4`'s family leave from; -1: none.
  int send_fd(bool v4) const { return sending_fd(v4 ? 0 : 1); }

  // Sends `len` bytes to `dst` port `dst_port` from `src`; false (errno) when
  // the kernel refused (no route, buffer full: a lost packet to RoCE).
  bool send(const in6_addr& src, const in6_addr& dst, uint16_t dst_port, uint8_t traffic_class,
            const uint8_t* data, size_t len);
  // Sends `count` datagrams with as few system calls as their address
  // families allow (sendmmsg). Consecutive datagrams of one flow and size
  // go as one UDP GSO send (UDP_SEGMENT): the kernel cuts them apart again,
  // late, so the stack is walked once per batch instead of once per packet.
  // Those the kernel refuses are lost packets.
  void send_many(OutDatagram* d, size_t count);
  // Receives one datagram from `fd` without blocking: its length, or -1
  // (errno EAGAIN when none is waiting).
  ssize_t receive(int fd, uint8_t* buf, size_t cap, DatagramInfo* info);
  // Receives up to `count` datagrams from `fd` without blocking, the i-th
  // into bufs[i] (`cap` bytes each); their lengths go to lens[] (-1: too
  // large, not RoCE). With UDP GRO a buffer may hold several datagrams of
  // one flow back to back, each segs[i] bytes (the last may be shorter;
  // 0: one datagram). Returns how many arrived (0 when none waits).
  int receive_many(int fd, uint8_t* const* bufs, size_t cap, int count, ssize_t* lens, uint16_t* segs,
                   DatagramInfo* infos);

 private:
  void open_send_sockets();
  // Sends leave from the socket of family index `f` (0: IPv4) that has
  // this process's own port, or from the receiving one.
  int sending_fd(int f) const {
    return f == 0 ? (send_fd4_ >= 0 ? send_fd4_ : fd4_) : (send_fd6_ >= 0 ? send_fd6_ : fd6_);
  }
  // The socket of lane `lane` in family index `f`, or the process's own.
  int sending_fd(int f, uint8_t lane) const {
    const int fd = lane ? lanes_[f][lane].fd.load(std::memory_order_acquire) : -1;
    return fd >= 0 ? fd : sending_fd(f);
  }

  int fd4_ = -1, fd6_ = -1;  // receiving (and, without the RoCE port, sending)
  uint16_t port4_ = 0, port6_ = 0;
  int send_fd4_ = -1, send_fd6_ = -1;  // sending, on ports of their own, once we hold the RoCE port
  uint16_t send_port4_ = 0, send_port6_ = 0;
  bool owns_port_ = false;
  bool gso_ = true;  // cleared when the kernel refuses UDP_SEGMENT
  // lane_port's sockets, by family index and lane: opened under lanes_mu_,
  // the port stored before the descriptor (send_many reads them without
  // the lock); kept until close(). fd -2: none could be had.
  struct Lane {
    std::atomic<int> fd{-1};
    uint16_t port = 0;
  };
  Lane lanes_[2][256];
  std::mutex lanes_mu_;
};

}  // namespace sv
