// The raw Ethernet port: one AF_PACKET socket per network interface in
// use, one receive thread per process that steers arriving frames to raw
// packet QPs by their flows, and the send side of those QPs.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/capability.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/cq.h"
#include "core/mr.h"
#include "core/qp.h"
#include "core/raw.h"
#include "core/target_memory.h"
#include "util/knobs.h"
#include "util/log.h"
#include "util/private_heap.h"

namespace sv {
namespace {

struct Port : PrivateHeapObject {
  std::string ifname;
  int ifindex = 0;
  int fd = -1;
  PrivateVector<Qp*> qps;
  PrivateVector<Flow*> flows;  // sorted: priority, then age
  bool closing = false;      // no QP left: the receive thread closes it (it may be polling it)
  bool loopback = false;     // lo shows every frame twice: as sent, then as received
};

struct RawNet : PrivateHeapObject {
  std::mutex mu;  // ports, their QPs and flows; held while a frame is delivered
  PrivateVector<Port*> ports;
  int wake_fd = -1;  // eventfd: the set of sockets changed
  bool started = false;
};

RawNet& net() {
  static RawNet* n = new RawNet;  // outlives static destructors: its thread is detached
  return *n;
}

// The interface raw QPs use: SOFTVERBS_NETDEV, else the first one that is
// up and not a loopback, else the loopback.
std::string choose_netdev() {
  if (std::string v = knob_netdev(); !v.empty()) return v;
  std::string found = "lo";
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return found;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_PACKET) continue;
    if ((a->ifa_flags & IFF_UP) && !(a->ifa_flags & IFF_LOOPBACK)) {
      found = a->ifa_name;
      break;
    }
  }
  freeifaddrs(list);
  return found;
}

bool is_loopback(const std::string& ifname) {
  bool lo = false;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return ifname == "lo";
  for (ifaddrs* a = list; a; a = a->ifa_next)
    if (a->ifa_name == ifname && (a->ifa_flags & IFF_LOOPBACK)) lo = true;
  freeifaddrs(list);
  return lo;
}

int open_socket(int ifindex) {
  int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, htons(ETH_P_ALL));
  if (fd < 0) return -1;
  int one = 1;
  // The kernel may strip a VLAN tag on receive: auxdata gives it back.
  setsockopt(fd, SOL_PACKET, PACKET_AUXDATA, &one, sizeof one);
  sockaddr_ll addr{};
  addr.sll_family = AF_PACKET;
  addr.sll_protocol = htons(ETH_P_ALL);
  addr.sll_ifindex = ifindex;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

void wake() {
  uint64_t one = 1;
  if (net().wake_fd >= 0) {
    ssize_t r = write(net().wake_fd, &one, sizeof one);
    (void)r;
  }
}

// ---- delivery (under net().mu)

const shm::Peer* self_peer(Context* ctx) { return ctx->host->peers().get(ctx->host->slot()); }

// Scatters `data` into the SGEs of a receive WQE of this process (each
// lkey checked as a NIC does); the completion status.
ibv_wc_status scatter_own(Context* ctx, const shm::Peer& self, uint32_t pd, const RecvWqeCopy& w,
                          const uint8_t* data, size_t len) {
  const shm::MrEntry* table = ctx->host->arena().mr_table();
  size_t done = 0;
  for (uint32_t i = 0; i < w.num_sge && done < len; ++i) {
    const ibv_sge& s = w.sge[i];
    if (!s.length) continue;
    MrView v;
    if (!read_mr(table, s.lkey, &v) || v.pd != pd || !(v.access & IBV_ACCESS_LOCAL_WRITE) || v.mw ||
        !v.covers(s.addr, s.length))
      return IBV_WC_LOC_PROT_ERR;
    size_t n = std::min<size_t>(s.length, len - done);
    if (!write_to_mr(self, v, s.addr, data + done, n)) return IBV_WC_LOC_PROT_ERR;
    done += n;
  }
  return done < len ? IBV_WC_LOC_LEN_ERR : IBV_WC_SUCCESS;
}

// The fields of the frame RSS hashes on, in the order of the Microsoft
// RSS specification (source address, destination address, source port,
// destination port), as the QP's rx_hash_fields_mask selects them.
uint32_t rss_hash(const Qp& qp, const packet::Parsed& p) {
  uint8_t in[36];
  size_t n = 0;
  const uint64_t f = qp.rss_fields;
  if (p.ip_version == 4) {
    if (f & IBV_RX_HASH_SRC_IPV4) std::memcpy(in + n, &p.src_ip4_be, 4), n += 4;
    if (f & IBV_RX_HASH_DST_IPV4) std::memcpy(in + n, &p.dst_ip4_be, 4), n += 4;
  } else if (p.ip_version == 6) {
    if (f & IBV_RX_HASH_SRC_IPV6) std::memcpy(in + n, p.src_ip6, 16), n += 16;
    if (f & IBV_RX_HASH_DST_IPV6) std::memcpy(in + n, p.dst_ip6, 16), n += 16;
  }
  if (p.l4) {
    const bool tcp = p.ip_proto == IPPROTO_TCP, udp = p.ip_proto == IPPROTO_UDP;
    const uint16_t sp = htons(p.src_port), dp = htons(p.dst_port);
    if ((tcp && (f & IBV_RX_HASH_SRC_PORT_TCP)) || (udp && (f & IBV_RX_HASH_SRC_PORT_UDP)))
      std::memcpy(in + n, &sp, 2), n += 2;
    if ((tcp && (f & IBV_RX_HASH_DST_PORT_TCP)) || (udp && (f & IBV_RX_HASH_DST_PORT_UDP)))
      std::memcpy(in + n, &dp, 2), n += 2;
  }
  return packet::toeplitz(qp.rss_key.data(), qp.rss_key.size(), in, n);
}

void deliver(Qp* qp, const packet::Parsed& p, const Flow& rule) {
  Context* ctx = qp->ctx;
  const shm::Peer* self = self_peer(ctx);
  if (!self) return;
  shm::RecvQueueShared* q = nullptr;
  Cq* cq = nullptr;
  uint32_t pd = 0, num = qp->qp_base.qp_num;
  if (qp->ind_table) {
    const auto& wqs = qp->ind_table->wqs;
    Wq* wq = wqs[rss_hash(*qp, p) & (wqs.size() - 1)];
    if (wq->state != IBV_WQS_RDY) return;
    q = wq->rq.shared();
    cq = wq->cq_obj;
    pd = wq->pd_obj->id;
    num = wq->wq_num;
  } else {
    ibv_qp_state st = qp->state();
    if (st != IBV_QPS_RTR && st != IBV_QPS_RTS) return;
    q = qp->rq.shared();
    cq = qp->rcq;
    pd = qp->pd_obj->id;
  }
  RecvWqeCopy w;
  if (!q || !take_recv_wqe(*self, q, &w)) return;  // no receive posted: the frame is dropped, as on a NIC
  // What lands in memory: the frame as it was on the wire, without its
  // C-VLAN tag if the QP strips it, with the FCS if the QP scatters it.
  std::vector<uint8_t> bytes(p.frame, p.frame + p.len);
  uint16_t stripped_tci = 0;
  if (qp->cvlan_strip && p.vlan) {
    stripped_tci = p.vlan_tci;
    bytes.erase(bytes.begin() + 12, bytes.begin() + 16);
  }
  if (qp->scatter_fcs) {
    uint32_t crc = packet::fcs(bytes.data(), bytes.size());
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<uint8_t>(crc >> (8 * i)));
  }
  shm::CqeFields c{};
  c.wr_id = w.wr_id;
  c.opcode = IBV_WC_RECV;
  c.qp_num = num;
  c.byte_len = static_cast<uint32_t>(bytes.size());
  c.status = scatter_own(ctx, *self, pd, w, bytes.data(), bytes.size());
  if (c.status != IBV_WC_SUCCESS) c.vendor_err = 0x100 + c.status;
  if (packet::checksums_ok(p.frame, p.len)) c.wc_flags |= IBV_WC_IP_CSUM_OK;
  c.slid = stripped_tci;  // read back as the C-VLAN (ibv_wc_read_cvlan); LIDs mean nothing on Ethernet
  if (rule.tagged) {
    c.imm_or_inv = rule.tag;  // read back as the flow tag (no immediate data on raw frames)
    c.flow_tagged = 1;
  }
  if (cq && !push_shared(ctx->host->peers(), *self, cq->shared, c))
    SV_WARN("raw QP %#x: CQ overrun, a receive completion was lost", qp->qp_base.qp_num);
}

// Steers one frame: the best NORMAL rule (lowest priority value, then the
// oldest), else a default rule; sniffers get a copy of everything, and are
// all that sees a frame sent from this interface, except for the local
// loopback of a frame a raw QP of this process sent (`looped_from`: its
// context, whose own QPs do not get it back, as on mlx5 without self
// loopback; sniffers have it from the socket).
void steer(Port& port, const packet::Parsed& p, bool sent, const Context* looped_from = nullptr) {
  Flow* best = nullptr;
  Flow* fallback = nullptr;
  const bool multicast = p.dst_mac[0] & 1;
  for (Flow* f : port.flows) {
    if (looped_from && (f->type == IBV_FLOW_ATTR_SNIFFER || f->qp->ctx == looped_from)) continue;
    switch (f->type) {
      case IBV_FLOW_ATTR_SNIFFER:
        if (f->counters) f->counters->count(p.len);
        if (!f->drop) deliver(f->qp, p, *f);
        break;
      case IBV_FLOW_ATTR_NORMAL:
        if (sent || best || !flow_matches(*f, p)) break;
        if (!f->dont_trap) {
          best = f;
          break;
        }
        if (f->counters) f->counters->count(p.len);  // a copy; the frame goes on down the rules
        if (!f->drop) deliver(f->qp, p, *f);
        break;
      case IBV_FLOW_ATTR_ALL_DEFAULT:
        if (!sent && !fallback) fallback = f;
        break;
      case IBV_FLOW_ATTR_MC_DEFAULT:
        if (!sent && !fallback && multicast) fallback = f;
        break;
      default:
        break;
    }
  }
  Flow* winner = best ? best : fallback;
  if (!winner) return;
  if (winner->counters) winner->counters->count(p.len);
  if (!winner->drop) deliver(winner->qp, p, *winner);
}

void receive_all(Port& port) {
  uint8_t buf[65536 + 4];
  for (;;) {
    sockaddr_ll from{};
    alignas(8) char control[CMSG_SPACE(sizeof(tpacket_auxdata))];
    iovec iov{buf + 4, 65536};  // room in front for a VLAN tag to put back
    msghdr msg{};
    msg.msg_name = &from;
    msg.msg_namelen = sizeof from;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = recvmsg(port.fd, &msg, MSG_DONTWAIT);
    if (n < 0) return;
    // Frames sent from this interface go to sniffers only (on lo each
    // comes back as received anyway).
    const bool sent = from.sll_pkttype == PACKET_OUTGOING;
    if (sent && port.loopback) continue;
    uint8_t* frame = buf + 4;
    size_t len = static_cast<size_t>(n);
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_PACKET || c->cmsg_type != PACKET_AUXDATA) continue;
      tpacket_auxdata aux;
      std::memcpy(&aux, CMSG_DATA(c), sizeof aux);
      if ((aux.tp_status & TP_STATUS_VLAN_VALID) && len >= 12) {
        // The kernel took the tag out of the frame: as it was on the wire.
        uint16_t tpid = (aux.tp_status & TP_STATUS_VLAN_TPID_VALID) ? aux.tp_vlan_tpid : ETH_P_8021Q;
        std::memmove(buf, frame, 12);
        frame = buf;
        frame[12] = static_cast<uint8_t>(tpid >> 8);
        frame[13] = static_cast<uint8_t>(tpid);
        frame[14] = static_cast<uint8_t>(aux.tp_vlan_tci >> 8);
        frame[15] = static_cast<uint8_t>(aux.tp_vlan_tci);
        len += 4;
      }
    }
    packet::Parsed p = packet::parse(frame, len);
    std::lock_guard g(net().mu);
    steer(port, p, sent);
  }
}

void receive_loop() {
  pthread_setname_np(pthread_self(), "softverbs-raw");
  for (;;) {
    std::vector<pollfd> fds{{net().wake_fd, POLLIN, 0}};
    std::vector<Port*> ports;
    {
      std::lock_guard g(net().mu);
      // Ports are closed and freed here only: this thread polls them.
      auto& all = net().ports;
      for (auto it = all.begin(); it != all.end();) {
        if ((*it)->closing) {
          close((*it)->fd);
          delete *it;
          it = all.erase(it);
        } else {
          ++it;
        }
      }
      for (Port* p : net().ports) {
        fds.push_back({p->fd, POLLIN, 0});
        ports.push_back(p);
      }
    }
    if (poll(fds.data(), fds.size(), -1) < 0) continue;
    if (fds[0].revents) {
      uint64_t v;
      ssize_t r = read(net().wake_fd, &v, sizeof v);
      (void)r;
      continue;  // the set changed: a port may be gone
    }
    for (size_t i = 1; i < fds.size(); ++i)
      if (fds[i].revents & POLLIN) receive_all(*ports[i - 1]);
  }
}

void start_locked() {
  RawNet& n = net();
  if (n.started) return;
  static bool atfork = (pthread_atfork(nullptr, nullptr,
                                       [] {
                                         // A fork child has no receive thread and none of the parent's QPs.
                                         RawNet& c = net();
                                         new (&c.mu) std::mutex;
                                         for (Port* p : c.ports) close(p->fd);
                                         c.ports.clear();
                                         if (c.wake_fd >= 0) close(c.wake_fd);
                                         c.wake_fd = -1;
                                         c.started = false;
                                       }),
                        true);
  (void)atfork;
  n.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // signals stay with the application's threads
  std::thread(receive_loop).detach();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  n.started = true;
}

Port* port_of(Qp* qp) { return static_cast<Port*>(qp->raw_port); }

ibv_wc_status send_frame(Qp* qp, const uint8_t* frame, size_t len) {
  Port* port = port_of(qp);
  if (len < 14) return IBV_WC_LOC_LEN_ERR;
  sockaddr_ll to{};
  to.sll_family = AF_PACKET;
  to.sll_ifindex = port->ifindex;
  to.sll_halen = 6;
  std::memcpy(to.sll_addr, frame, 6);
  ssize_t n = sendto(port->fd, frame, len, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
  if (n == static_cast<ssize_t>(len)) {
    // A NIC loops a sent frame back to the flows of its other contexts
    // (mlx5 enables local loopback once two are open): rdma-core's flow
    // and RSS tests send from one context to a flow of another. On lo the
    // kernel loops every frame back itself.
    if (!port->loopback) {
      std::lock_guard g(net().mu);
      if (!port->flows.empty()) steer(*port, packet::parse(frame, len), false, qp->ctx);
    }
    return IBV_WC_SUCCESS;
  }
  SV_INFO("raw QP %#x: sending %zu bytes on %s: %s", qp->qp_base.qp_num, len, port->ifname.c_str(),
          strerror(errno));
  return errno == EMSGSIZE ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_QP_OP_ERR;
}

}  // namespace

bool may_use_raw_packets() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  return data[CAP_NET_RAW / 32].effective & (1u << (CAP_NET_RAW % 32));
}

int raw_attach(Qp* qp) {
  if (!may_use_raw_packets()) return EPERM;
  const std::string ifname = choose_netdev();
  const int ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
  if (!ifindex) {
    SV_INFO("raw packet QP: no network interface %s", ifname.c_str());
    return ENODEV;
  }
  std::lock_guard g(net().mu);
  Port* port = nullptr;
  for (Port* p : net().ports)
    if (p->ifindex == ifindex) port = p;
  if (port) port->closing = false;
  if (!port) {
    int fd = open_socket(ifindex);
    if (fd < 0) return errno == EPERM || errno == EACCES ? EPERM : errno;
    port = new Port{{}, ifname, ifindex, fd, {}, {}, false, is_loopback(ifname)};
    net().ports.push_back(port);
    start_locked();
    wake();
  }
  port->qps.push_back(qp);
  qp->raw_port = port;
  return 0;
}

void raw_detach(Qp* qp) {
  Port* port = port_of(qp);
  if (!port) return;
  std::lock_guard g(net().mu);
  port->qps.erase(std::remove(port->qps.begin(), port->qps.end(), qp), port->qps.end());
  qp->raw_port = nullptr;
  if (port->qps.empty()) {
    port->closing = true;
    wake();
  }
}

void raw_add_flow(Flow* flow) {
  Port* port = port_of(flow->qp);
  std::lock_guard g(net().mu);
  auto& v = port->flows;
  auto at = std::upper_bound(v.begin(), v.end(), flow, [](const Flow* a, const Flow* b) {
    return a->priority != b->priority ? a->priority < b->priority : a->order < b->order;
  });
  v.insert(at, flow);
}

void raw_remove_flow(Flow* flow) {
  Port* port = port_of(flow->qp);
  std::lock_guard g(net().mu);
  port->flows.erase(std::remove(port->flows.begin(), port->flows.end(), flow), port->flows.end());
}

ibv_wc_status raw_send(Qp* qp, const uint8_t* frame, size_t len, unsigned send_flags) {
  if (!(send_flags & IBV_SEND_IP_CSUM)) return send_frame(qp, frame, len);
  std::vector<uint8_t> copy(frame, frame + len);
  packet::fill_checksums(copy.data(), copy.size());
  return send_frame(qp, copy.data(), copy.size());
}

ibv_wc_status raw_send_tso(Qp* qp, const uint8_t* hdr, size_t hdr_len, uint16_t mss, const uint8_t* payload,
                           size_t len, unsigned) {
  auto frames = packet::segment_tcp(hdr, hdr_len, payload, len, mss);
  if (frames.empty()) return IBV_WC_LOC_QP_OP_ERR;  // not Ethernet/IP/TCP, or no MSS
  for (const auto& f : frames)
    if (ibv_wc_status s = send_frame(qp, f.data(), f.size()); s != IBV_WC_SUCCESS) return s;
  return IBV_WC_SUCCESS;
}

}  // namespace sv
