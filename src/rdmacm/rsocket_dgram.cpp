// rsockets, datagram sockets.
//
// Design (simpler than rdma-core's, which resolves peers in a service
// thread): the rsocket's number is a real UDP socket, which gives it its
// address and port (rbind, rgetsockname) and carries the first datagram to
// a peer we do not know yet. Every datagram starts with a DgramHeader that
// names the sender's address, UD QPN and GID, so the receiver learns how to
// reach the sender over RDMA; from then on datagrams to that address go as
// UD SENDs. Datagrams larger than the path MTU allows keep using UDP.
// Nothing runs in the background: rrecvfrom and rpoll look at both the
// completion queue and the UDP socket.
#include "rsocket_dgram.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "c_boundary.h"
#include "cm_device.h"
#include "util/kernel_socket.h"
#include "util/private_heap.h"

namespace sv::rdmacm::rs {
namespace {

constexpr uint32_t kTag = 0x53564447;   // "SVDG"
constexpr uint32_t kQkey = 0x01234567;  // RDMA_UDP_QKEY
constexpr uint32_t kGrh = 40;
constexpr size_t kMaxUdpPayload = 65507;
constexpr int kCqBatch = 16;
constexpr unsigned kAckBatch = 64;
// Datagrams from peers we know arrive over UD, and a look at the UDP socket
// costs a system call: one that polls looks there at most this often, so a
// receiver that keeps finding UD datagrams is not slowed down by it (and
// does not fall behind a sender and drop datagrams). A sleeper always
// watches the socket.
constexpr uint64_t kUdpLookNs = 20'000;
// DgramHeader::flags: the sender's previous datagram to this receiver went
// by UDP (too large for one UD message, or sent before it knew the
// receiver's QP). This one, by UD, could overtake it: the receiver takes
// what waits on its UDP socket first. (udpong's 1000-byte data went by UDP,
// its small "end" by UD and was answered before the data was all read:
// 2 of 10 datagrams counted on loopback.)
constexpr uint32_t kAfterUdp = 1;

struct DgramHeader {
  uint32_t tag;
  uint32_t qpn;
  uint16_t family;
  uint16_t port;  // network order
  uint32_t flags;  // kAfterUdp
  uint8_t addr[16];
  uint8_t gid[16];
};
static_assert(sizeof(DgramHeader) == 48);

// An address as a map key: family, port, address bytes.
struct AddrKey {
  uint16_t family = 0;
  uint16_t port = 0;
  uint8_t addr[16] = {};
  auto operator<=>(const AddrKey&) const = default;
};

AddrKey key_of(const sockaddr* sa) {
  AddrKey k;
  k.family = sa->sa_family;
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    k.port = in->sin_port;
    std::memcpy(k.addr, &in->sin_addr, 4);
  } else if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    k.port = in6->sin6_port;
    std::memcpy(k.addr, &in6->sin6_addr, 16);
  }
  return k;
}

socklen_t sockaddr_of(const AddrKey& k, sockaddr_storage* out) {
  std::memset(out, 0, sizeof *out);
  if (k.family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(out);
    in->sin_family = AF_INET;
    in->sin_port = k.port;
    std::memcpy(&in->sin_addr, k.addr, 4);
    return sizeof *in;
  }
  auto* in6 = reinterpret_cast<sockaddr_in6*>(out);
  in6->sin6_family = AF_INET6;
  in6->sin6_port = k.port;
  std::memcpy(&in6->sin6_addr, k.addr, 16);
  return sizeof *in6;
}

struct Dest {
  AddrKey self;  // our address as this peer sees it
  uint32_t qpn = 0;
  ibv_gid gid{};
  // Our GID toward this peer: the one of `self` (or of the address its
  // datagrams came to), as rdma-core's rsockets sends from the GID of the
  // address it is bound to. Not a fixed index: one may be a loopback
  // address, which names this host only.
  ibv_gid sgid{};
  int sgid_index = -1;  // -1: not known yet
  ibv_ah* ah = nullptr;
  bool last_by_udp = false;  // our last datagram to it went by UDP
};

struct Received {
  uint32_t slot;
  uint32_t length;  // GRH included
};

}  // namespace

struct DgramState : PrivateHeapObject {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* comp_channel = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_gid gid{};
  int gid_table_len = 0;
  bool cq_armed = false;
  unsigned unacked = 0;
  uint32_t mtu = 1024;
  uint32_t sq_size = 0;
  uint32_t rq_size = 0;
  uint8_t* rbuf = nullptr;  // rbuf_pages.data
  ibv_mr* rmr = nullptr;
  uint8_t* sbuf = nullptr;  // sbuf_pages.data
  ibv_mr* smr = nullptr;
  Pages rbuf_pages;
  Pages sbuf_pages;
  PrivateVector<uint32_t> free_send;
  PrivateDeque<Received> ready;
  PrivateMap<AddrKey, Dest> dests;
  bool connected = false;
  sockaddr_storage peer{};
  socklen_t peer_len = 0;
  PrivateVector<uint8_t> udp_buf;
  uint64_t udp_looked_ns = 0;  // when take_udp / udp_readable last ran

  // Whether it is time to look at the UDP socket again (and, if so, notes that we do).
  bool time_to_look_at_udp() {
    const uint64_t now = now_ns();
    if (now - udp_looked_ns < kUdpLookNs) return false;
    udp_looked_ns = now;
    return true;
  }

  uint32_t recv_slot_size() const { return kGrh + mtu; }
  uint8_t* recv_slot(uint32_t i) const { return rbuf + size_t(i) * recv_slot_size(); }
  uint8_t* send_slot(uint32_t i) const { return sbuf + size_t(i) * mtu; }
};

namespace {

int post_recv_slot(DgramState& d, uint32_t slot) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(d.recv_slot(slot)), d.recv_slot_size(), d.rmr->lkey};
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  int rc = ibv_post_recv(d.qp, &wr, &bad);
  return rc ? fail(rc) : 0;
}

int modify(ibv_qp* qp, ibv_qp_attr& attr, int mask) {
  int rc = ibv_modify_qp(qp, &attr, mask);
  return rc ? fail(rc) : 0;
}

// The device, PD, CQ, UD QP (ready to send) and buffers.
int open_verbs(RSocket& rs, DgramState& d) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) return -1;
  if (n > 0) d.ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!d.ctx) return fail(n > 0 ? errno : ENODEV);
  ibv_port_attr port{};
  if (ibv_query_port(d.ctx, 1, &port) != 0) return -1;
  d.mtu = 128u << std::clamp<int>(port.active_mtu, IBV_MTU_256, IBV_MTU_4096);
  d.gid_table_len = port.gid_tbl_len;
  if (ibv_query_gid(d.ctx, 1, 0, &d.gid) != 0) return -1;
  d.pd = ibv_alloc_pd(d.ctx);
  if (!d.pd) return -1;
  d.comp_channel = ibv_create_comp_channel(d.ctx);
  if (!d.comp_channel) return -1;
  fcntl(d.comp_channel->fd, F_SETFL, fcntl(d.comp_channel->fd, F_GETFL) | O_NONBLOCK);
  d.sq_size = std::clamp(rs.opt.sq_size, 16u, 4096u);
  d.rq_size = std::clamp(rs.opt.rq_size, 16u, 4096u);
  d.cq = ibv_create_cq(d.ctx, static_cast<int>(d.sq_size + d.rq_size), &rs, d.comp_channel, 0);
  if (!d.cq) return -1;

  const size_t rlen = size_t(d.rq_size) * d.recv_slot_size();
  const size_t slen = size_t(d.sq_size) * d.mtu;
  d.rbuf_pages = map_pages(rlen);
  d.sbuf_pages = map_pages(slen);
  d.rbuf = d.rbuf_pages.data;
  d.sbuf = d.sbuf_pages.data;
  if (!d.rbuf || !d.sbuf) return fail(ENOMEM);
  d.rmr = ibv_reg_mr(d.pd, d.rbuf, rlen, IBV_ACCESS_LOCAL_WRITE);
  d.smr = ibv_reg_mr(d.pd, d.sbuf, slen, IBV_ACCESS_LOCAL_WRITE);
  if (!d.rmr || !d.smr) return -1;

  ibv_qp_init_attr attr{};
  attr.send_cq = d.cq;
  attr.recv_cq = d.cq;
  attr.qp_type = IBV_QPT_UD;
  attr.sq_sig_all = 1;
  attr.cap.max_send_wr = d.sq_size;
  attr.cap.max_recv_wr = d.rq_size;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  d.qp = ibv_create_qp(d.pd, &attr);
  if (!d.qp) return -1;
  ibv_qp_attr qa{};
  qa.qp_state = IBV_QPS_INIT;
  qa.pkey_index = 0;
  qa.port_num = 1;
  qa.qkey = kQkey;
  if (modify(d.qp, qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) return -1;
  qa = {};
  qa.qp_state = IBV_QPS_RTR;
  if (modify(d.qp, qa, IBV_QP_STATE)) return -1;
  qa.qp_state = IBV_QPS_RTS;
  qa.sq_psn = 0;
  if (modify(d.qp, qa, IBV_QP_STATE | IBV_QP_SQ_PSN)) return -1;
  for (uint32_t i = 0; i < d.rq_size; ++i)
    if (post_recv_slot(d, i) != 0) return -1;
  for (uint32_t i = d.sq_size; i-- > 0;) d.free_send.push_back(i);
  return 0;
}

void close_verbs(DgramState& d) {
  for (auto& [key, dest] : d.dests)
    if (dest.ah) ibv_destroy_ah(dest.ah);
  d.dests.clear();
  if (d.qp) ibv_destroy_qp(d.qp);
  if (d.cq) {
    if (d.unacked) ibv_ack_cq_events(d.cq, d.unacked);
    ibv_destroy_cq(d.cq);
  }
  if (d.comp_channel) ibv_destroy_comp_channel(d.comp_channel);
  if (d.rmr) ibv_dereg_mr(d.rmr);
  if (d.smr) ibv_dereg_mr(d.smr);
  unmap_pages(d.rbuf_pages);
  unmap_pages(d.sbuf_pages);
  if (d.pd) ibv_dealloc_pd(d.pd);
  if (d.ctx) ibv_close_device(d.ctx);
  d = DgramState{};
}

void poll_dgram_cq(DgramState& d) {
  if (!d.cq) return;
  ibv_wc wc[kCqBatch];
  for (;;) {
    int n = ibv_poll_cq(d.cq, kCqBatch, wc);
    for (int i = 0; i < n; ++i) {
      if (wc[i].opcode & IBV_WC_RECV) {
        const uint32_t slot = static_cast<uint32_t>(wc[i].wr_id);
        if (wc[i].status == IBV_WC_SUCCESS)
          d.ready.push_back(Received{slot, wc[i].byte_len});
        else if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
          post_recv_slot(d, slot);
      } else {
        d.free_send.push_back(static_cast<uint32_t>(wc[i].wr_id));
      }
    }
    if (n < kCqBatch) break;
  }
}

void consume_events(DgramState& d) {
  if (!d.comp_channel) return;
  ibv_cq* cq;
  void* ctx;
  while (ibv_get_cq_event(d.comp_channel, &cq, &ctx) == 0) {
    d.cq_armed = false;
    if (++d.unacked >= kAckBatch) {
      ibv_ack_cq_events(d.cq, d.unacked);
      d.unacked = 0;
    }
  }
}

// Our address as `dest` will see it: the UDP socket's own, or, when that is
// a wildcard, the source address the kernel would pick for `dest`.
AddrKey self_for(const RSocket& rs, const sockaddr* dest, socklen_t dest_len) {
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  getsockname(rs.fd, reinterpret_cast<sockaddr*>(&local), &len);
  AddrKey k = key_of(reinterpret_cast<sockaddr*>(&local));
  static const uint8_t zero[16] = {};
  const size_t alen = k.family == AF_INET ? 4 : 16;
  if (std::memcmp(k.addr, zero, alen) != 0) return k;
  // The system call itself: librspreload would turn socket() into an rsocket.
  int probe = static_cast<int>(syscall(SYS_socket, dest->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (probe < 0) return k;
  sockaddr_storage src{};
  len = sizeof src;
  if (connect(probe, dest, dest_len) == 0 &&
      getsockname(probe, reinterpret_cast<sockaddr*>(&src), &len) == 0) {
    AddrKey s = key_of(reinterpret_cast<sockaddr*>(&src));
    std::memcpy(k.addr, s.addr, sizeof k.addr);
  }
  close(probe);
  return k;
}

// The GID of our address `self`.
ibv_gid gid_of(const AddrKey& self) {
  sockaddr_storage a{};
  sockaddr_of(self, &a);
  return address_to_gid(reinterpret_cast<sockaddr*>(&a));
}

// Makes `gid` (when the port has it; else GID 0) our GID toward `dest`.
void use_sgid(DgramState& d, Dest& dest, const ibv_gid& gid) {
  const int index = find_gid_index(d.ctx, d.gid_table_len, gid);
  dest.sgid_index = index >= 0 ? index : 0;
  dest.sgid = index >= 0 ? gid : d.gid;
}

// The GID a UD datagram was sent to, from the 40 bytes before it: on
// RoCEv2 the packet's IP header (IPv4: after 20 unused bytes; IPv6: the
// IPv6 header, its destination at byte 24), as ibv_init_ah_from_wc reads it.
ibv_gid destination_gid(const uint8_t* grh) {
  ibv_gid g{};
  if ((grh[20] >> 4) == 4) {
    g.raw[10] = g.raw[11] = 0xff;
    std::memcpy(g.raw + 12, grh + 20 + 16, 4);
  } else {
    std::memcpy(g.raw, grh + 24, 16);
  }
  return g;
}

// Records that `who` is reached at UD QPN `qpn` through `gid`, from our
// GID `ours()` (asked only the first time: it may cost system calls).
template <typename OurGid>
void learn(DgramState& d, const AddrKey& who, uint32_t qpn, const uint8_t* gid, OurGid&& ours) {
  Dest& dest = d.dests[who];
  if (dest.ah && dest.qpn == qpn && std::memcmp(dest.gid.raw, gid, 16) == 0) return;
  if (dest.ah) ibv_destroy_ah(dest.ah);
  dest.ah = nullptr;
  dest.qpn = qpn;
  std::memcpy(dest.gid.raw, gid, 16);
  if (dest.sgid_index < 0) use_sgid(d, dest, ours());
  ibv_ah_attr attr{};
  attr.is_global = 1;
  attr.grh.dgid = dest.gid;
  attr.grh.sgid_index = static_cast<uint8_t>(dest.sgid_index);
  attr.grh.hop_limit = 64;
  attr.port_num = 1;
  dest.ah = ibv_create_ah(d.pd, &attr);
}

bool valid_header(const DgramHeader& h, size_t len) {
  return len >= sizeof h && h.tag == kTag && (h.family == AF_INET || h.family == AF_INET6);
}

size_t total_length(const iovec* iov, int iovcnt) {
  size_t n = 0;
  for (int i = 0; i < iovcnt; ++i) n += iov[i].iov_len;
  return n;
}

size_t scatter(const iovec* iov, int iovcnt, const uint8_t* src, size_t len) {
  size_t done = 0;
  for (int i = 0; i < iovcnt && done < len; ++i) {
    size_t n = std::min(len - done, iov[i].iov_len);
    std::memcpy(iov[i].iov_base, src + done, n);
    done += n;
  }
  return done;
}

void gather(uint8_t* dst, const iovec* iov, int iovcnt) {
  for (int i = 0; i < iovcnt; ++i) {
    std::memcpy(dst, iov[i].iov_base, iov[i].iov_len);
    dst += iov[i].iov_len;
  }
}

void report_source(const AddrKey& who, sockaddr* src, socklen_t* src_len) {
  if (!src || !src_len) return;
  sockaddr_storage ss;
  socklen_t len = sockaddr_of(who, &ss);
  std::memcpy(src, &ss, std::min(*src_len, len));
  *src_len = len;
}

// Whether the oldest datagram that arrived over UD was sent after one by
// UDP from the same sender (kAfterUdp): that one must be taken first.
bool ud_waits_for_udp(const DgramState& d) {
  if (d.ready.empty()) return false;
  const Received& r = d.ready.front();
  if (r.length < kGrh + sizeof(DgramHeader)) return false;
  DgramHeader h;
  std::memcpy(&h, d.recv_slot(r.slot) + kGrh, sizeof h);
  return h.tag == kTag && (h.flags & kAfterUdp);
}

// A datagram that arrived over UD: 1 (delivered), 0 (none).
ssize_t take_ud(DgramState& d, const iovec* iov, int iovcnt, bool peek, sockaddr* src,
                socklen_t* src_len) {
  while (!d.ready.empty()) {
    Received r = d.ready.front();
    const uint8_t* data = d.recv_slot(r.slot) + kGrh;
    const size_t len = r.length > kGrh ? r.length - kGrh : 0;
    DgramHeader h;
    if (len < sizeof h) {
      d.ready.pop_front();
      post_recv_slot(d, r.slot);
      continue;
    }
    std::memcpy(&h, data, sizeof h);
    if (!valid_header(h, len)) {
      d.ready.pop_front();
      post_recv_slot(d, r.slot);
      continue;
    }
    AddrKey who{};
    who.family = h.family;
    who.port = h.port;
    std::memcpy(who.addr, h.addr, 16);
    const size_t copied = scatter(iov, iovcnt, data + sizeof h, len - sizeof h);
    report_source(who, src, src_len);
    if (!peek) {
      learn(d, who, h.qpn, h.gid, [&] { return destination_gid(d.recv_slot(r.slot)); });
      d.ready.pop_front();
      post_recv_slot(d, r.slot);
    }
    (void)copied;
    return static_cast<ssize_t>(copied);
  }
  return -1;
}

// A datagram from the UDP socket, or -1 with errno (EAGAIN: none).
ssize_t take_udp(RSocket& rs, DgramState& d, const iovec* iov, int iovcnt, bool peek, sockaddr* src,
                 socklen_t* src_len) {
  d.udp_buf.resize(kMaxUdpPayload + sizeof(DgramHeader));
  sockaddr_storage from{};
  socklen_t from_len = sizeof from;
  ssize_t n =
      recvfrom(rs.fd, d.udp_buf.data(), d.udp_buf.size(), MSG_DONTWAIT | (peek ? MSG_PEEK : 0),
               reinterpret_cast<sockaddr*>(&from), &from_len);
  if (n < 0) return -1;
  AddrKey who = key_of(reinterpret_cast<sockaddr*>(&from));
  DgramHeader h{};
  const uint8_t* payload = d.udp_buf.data();
  size_t len = static_cast<size_t>(n);
  if (len >= sizeof h) std::memcpy(&h, payload, sizeof h);
  if (valid_header(h, len)) {
    if (!peek)
      learn(d, who, h.qpn, h.gid, [&] {
        sockaddr_storage back{};
        const socklen_t back_len = sockaddr_of(who, &back);
        return gid_of(self_for(rs, reinterpret_cast<sockaddr*>(&back), back_len));
      });
    payload += sizeof h;
    len -= sizeof h;
  }  // else: a plain UDP sender; its datagram is delivered as it is
  size_t copied = scatter(iov, iovcnt, payload, len);
  report_source(who, src, src_len);
  return static_cast<ssize_t>(copied);
}

bool udp_readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

DgramHeader header_for(const DgramState& d, const Dest& to) {
  DgramHeader h{};
  h.tag = kTag;
  h.qpn = d.qp->qp_num;
  h.family = to.self.family;
  h.port = to.self.port;
  std::memcpy(h.addr, to.self.addr, 16);
  std::memcpy(h.gid, to.sgid.raw, 16);
  return h;
}

}  // namespace

void DgramDeleter::operator()(DgramState* d) const noexcept { delete d; }

int dgram_create(RSocket& rs, int domain) {
  rs.dgram.reset(new DgramState);
  rs.fd = sv::kernel_socket(domain, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (rs.fd < 0) return -1;
  return open_verbs(rs, *rs.dgram);
}

int dgram_bind(RSocket& rs, const sockaddr* addr, socklen_t len) { return bind(rs.fd, addr, len); }

int dgram_connect(RSocket& rs, const sockaddr* addr, socklen_t len) {
  std::lock_guard<std::mutex> guard(rs.mutex);
  if (connect(rs.fd, addr, len) != 0) return -1;
  DgramState& d = *rs.dgram;
  d.connected = true;
  std::memcpy(&d.peer, addr, std::min<size_t>(len, sizeof d.peer));
  d.peer_len = len;
  return 0;
}

ssize_t dgram_send(RSocket& rs, const iovec* iov, int iovcnt, int flags, const sockaddr* dest,
                   socklen_t dest_len) {
  const size_t len = total_length(iov, iovcnt);
  if (len > kMaxUdpPayload - sizeof(DgramHeader)) return fail_as<ssize_t>(EMSGSIZE);
  std::lock_guard<std::mutex> serial(rs.send_mutex);
  std::unique_lock<std::mutex> lock(rs.mutex);
  DgramState& d = *rs.dgram;
  if (!dest) {
    if (!d.connected) return fail_as<ssize_t>(EDESTADDRREQ);
    dest = reinterpret_cast<const sockaddr*>(&d.peer);
    dest_len = d.peer_len;
  }
  const AddrKey key = key_of(dest);
  auto it = d.dests.find(key);
  if (it == d.dests.end()) {
    // Make sure the UDP socket has a port before telling anybody about it.
    sockaddr_storage local{};
    socklen_t local_len = sizeof local;
    getsockname(rs.fd, reinterpret_cast<sockaddr*>(&local), &local_len);
    if (key_of(reinterpret_cast<sockaddr*>(&local)).port == 0) {
      sockaddr_storage any{};
      any.ss_family = static_cast<sa_family_t>(rs.domain);
      bind(rs.fd, reinterpret_cast<sockaddr*>(&any),
           rs.domain == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    }
    it = d.dests.emplace(key, Dest{}).first;
  }
  if (it->second.self.family == 0) it->second.self = self_for(rs, dest, dest_len);
  Dest& target = it->second;
  if (target.sgid_index < 0) use_sgid(d, target, gid_of(target.self));
  DgramHeader h = header_for(d, target);
  const bool nonblock = rs.nonblocking(flags);

  if (target.ah && len + sizeof h <= d.mtu) {
    if (target.last_by_udp) h.flags |= kAfterUdp;
    const uint64_t start = now_ns();
    for (;;) {
      if (rs.closed) return fail_as<ssize_t>(EBADF);
      poll_dgram_cq(d);
      if (!d.free_send.empty()) break;
      if (nonblock) return fail_as<ssize_t>(EAGAIN);
      if (now_ns() - start < uint64_t(defaults().polling_time_us) * 1000) continue;
      if (!d.cq_armed && ibv_req_notify_cq(d.cq, 0) == 0) d.cq_armed = true;
      poll_dgram_cq(d);
      if (!d.free_send.empty()) break;
      pollfd p{d.comp_channel->fd, POLLIN, 0};
      lock.unlock();
      poll(&p, 1, 1000);
      lock.lock();
      consume_events(d);
    }
    const uint32_t slot = d.free_send.back();
    d.free_send.pop_back();
    uint8_t* buf = d.send_slot(slot);
    std::memcpy(buf, &h, sizeof h);
    gather(buf + sizeof h, iov, iovcnt);
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf), static_cast<uint32_t>(sizeof h + len),
                d.smr->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.wr.ud.ah = target.ah;
    wr.wr.ud.remote_qpn = target.qpn;
    wr.wr.ud.remote_qkey = kQkey;
    int rc = ibv_post_send(d.qp, &wr, &bad);
    if (rc) {
      d.free_send.push_back(slot);
      return fail_as<ssize_t>(rc);
    }
    target.last_by_udp = false;
    return static_cast<ssize_t>(len);
  }

  // Not known yet (or too large for one UD message): UDP, with our header.
  std::vector<iovec> parts;
  parts.push_back(iovec{const_cast<DgramHeader*>(&h), sizeof h});
  for (int i = 0; i < iovcnt; ++i) parts.push_back(iov[i]);
  msghdr msg{};
  msg.msg_name = const_cast<sockaddr*>(dest);
  msg.msg_namelen = d.connected ? 0 : dest_len;
  if (d.connected) msg.msg_name = nullptr;
  msg.msg_iov = parts.data();
  msg.msg_iovlen = parts.size();
  target.last_by_udp = true;
  lock.unlock();
  ssize_t n = sendmsg(rs.fd, &msg, nonblock ? MSG_DONTWAIT : 0);
  if (n < 0) return -1;
  return n >= static_cast<ssize_t>(sizeof h) ? n - static_cast<ssize_t>(sizeof h) : 0;
}

ssize_t dgram_recv(RSocket& rs, const iovec* iov, int iovcnt, int flags, sockaddr* src,
                   socklen_t* src_len) {
  std::lock_guard<std::mutex> serial(rs.recv_mutex);
  std::unique_lock<std::mutex> lock(rs.mutex);
  DgramState& d = *rs.dgram;
  const bool peek = flags & MSG_PEEK;
  const bool nonblock = rs.nonblocking(flags);
  const uint64_t start = now_ns();
  const uint64_t spin_ns = uint64_t(defaults().polling_time_us) * 1000;
  for (;;) {
    if (rs.closed) return fail_as<ssize_t>(EBADF);
    poll_dgram_cq(d);
    if (ud_waits_for_udp(d)) {  // its sender's earlier datagram first, if it is there
      ssize_t n = take_udp(rs, d, iov, iovcnt, peek, src, src_len);
      if (n >= 0) return n;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    }
    ssize_t n = take_ud(d, iov, iovcnt, peek, src, src_len);
    if (n >= 0) return n;
    if (d.time_to_look_at_udp()) {
      n = take_udp(rs, d, iov, iovcnt, peek, src, src_len);
      if (n >= 0) return n;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    }
    if (nonblock) return fail_as<ssize_t>(EAGAIN);
    if (now_ns() - start < spin_ns) continue;  // poll for polling_time first, as rdma-core
    if (!d.cq_armed && ibv_req_notify_cq(d.cq, 0) == 0) d.cq_armed = true;
    poll_dgram_cq(d);
    if (!d.ready.empty()) continue;
    pollfd p[2] = {{rs.fd, POLLIN, 0}, {d.comp_channel->fd, POLLIN, 0}};
    lock.unlock();
    poll(p, 2, 1000);
    lock.lock();
    consume_events(d);
    d.udp_looked_ns = 0;  // look at once: the socket may be what woke us
  }
}

short dgram_revents(RSocket& rs, short events) {
  std::lock_guard<std::mutex> guard(rs.mutex);
  if (rs.closed) return POLLNVAL;
  DgramState& d = *rs.dgram;
  poll_dgram_cq(d);
  short r = POLLOUT;  // UDP can always take the datagram
  if (!d.ready.empty() || ((events & POLLIN) && d.time_to_look_at_udp() && udp_readable(rs.fd)))
    r |= POLLIN;
  return r & events;
}

void dgram_arm(RSocket& rs) {
  std::lock_guard<std::mutex> guard(rs.mutex);
  DgramState& d = *rs.dgram;
  if (d.cq && !d.cq_armed && ibv_req_notify_cq(d.cq, 0) == 0) d.cq_armed = true;
}

int dgram_sleep_fds(const RSocket& rs, pollfd* out) {
  out[0] = pollfd{rs.fd, POLLIN, 0};
  if (!rs.dgram->comp_channel) return 1;
  out[1] = pollfd{rs.dgram->comp_channel->fd, POLLIN, 0};
  return 2;
}

void dgram_woken(RSocket& rs) {
  std::lock_guard<std::mutex> guard(rs.mutex);
  consume_events(*rs.dgram);
  rs.dgram->udp_looked_ns = 0;  // the UDP socket may be what woke the caller
}

void dgram_close(RSocket& rs) {
  std::lock_guard<std::mutex> guard(rs.mutex);
  rs.closed = true;
  if (rs.dgram) close_verbs(*rs.dgram);
  if (rs.fd >= 0) close(rs.fd);
  rs.fd = -1;
}

}  // namespace sv::rdmacm::rs
