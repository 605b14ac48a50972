// The connection manager between hosts: IB CM MADs to the peer's QP1, over
// RoCEv2 (docs/ARCHITECTURE.md, "Connection manager", "Between hosts").
//
// Out: each MAD leaves as a RoCEv2 UD SEND from QP1 with the GSI Q_Key,
// built with the wire codec and sent from a UDP socket of this library (the
// kernel writes IP and UDP; the ICRC covers them, so it is computed for the
// socket's port). In: whichever softverbs process on this host receives a
// QP1 packet posts the MAD to the mailbox it names (ibcm/gsi_mailbox.h): a
// listener's, by service ID and address, or the process's id mailbox, by
// the top 16 bits of the communication ID, which then finds the id by the
// whole comm ID (ProcessNet::ids). Mailboxes are datagram sockets in the
// channels' epoll sets (the process's, as a SharedWatch, in each channel
// with an id that talks to another host), so MADs are read where every
// other CM event is made: in a thread that pumps a channel.
//
// MADs can be lost: a REQ, REP, DREQ or SIDR REQ is sent again on a timer
// until its answer comes (a repeated REQ is answered with the REP again, a
// repeated REP with the RTU again, every DREQ with a DREP), and the
// connection fails with UNREACHABLE (-ETIMEDOUT), as Linux's CM reports it,
// when retries run out. One timerfd serves every id of the process, armed
// for the earliest deadline.
//
// So an id with a network link holds no fd of its own: a process's fds do
// not grow with its connections (cmtime -c 1000 under the default limit of
// 1024 open files).
#include "cm_network.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <dirent.h>
#include <poll.h>
#include <endian.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <unordered_map>

#include "cm_address.h"
#include "cm_host_service.h"
#include "cm_device.h"
#include "cm_mad.h"
#include "cm_protocol.h"
#include "cm_qp.h"
#include "net/roce_datagram.h"
#include "net/roce_opcode.h"
#include "net/udp_sport.h"
#include "util/clock.h"
#include "util/kernel_socket.h"
#include "util/peer_credentials.h"
#include "util/private_heap.h"

namespace sv::rdmacm {
namespace {

namespace net = sv::net;

// First retry after 1 s, doubling to 4 s: 8 retries give up after ~25 s.
constexpr int kFirstRetryMs = 1000;
constexpr int kMaxRetryMs = 4000;
constexpr int kRetries = 8;

std::mt19937& rng() {
  static std::mt19937 r{std::random_device{}()};
  return r;
}

// Every id with a network link (passive duplicates are found here).
PrivateVector<Id*>& net_ids() {
  static auto* ids = new_private<PrivateVector<Id*>>();
  return *ids;
}

in6_addr ip_of(const sockaddr* addr) {
  in6_addr out{};
  sockaddr_storage norm = normalized(addr);
  if (norm.ss_family == AF_INET) {
    out.s6_addr[10] = out.s6_addr[11] = 0xff;
    std::memcpy(&out.s6_addr[12], &reinterpret_cast<sockaddr_in*>(&norm)->sin_addr, 4);
  } else {
    out = reinterpret_cast<sockaddr_in6*>(&norm)->sin6_addr;
  }
  return out;
}

// The UDP socket MADs leave from, one per family, bound to an ephemeral port.
struct MadSocket {
  int fd = -1;
  uint16_t port = 0;
};

MadSocket& mad_socket(bool v4) {
  static MadSocket sockets[2];
  static pid_t owner = 0;
  if (owner != getpid()) {  // a fork child makes its own
    sockets[0] = sockets[1] = MadSocket{};
    owner = getpid();
  }
  MadSocket& s = sockets[v4 ? 0 : 1];
  if (s.fd >= 0) return s;
  int fd = sv::kernel_socket(v4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return s;
  int on = 1;
  sockaddr_storage any{};
  socklen_t len;
  if (v4) {
    int df = IP_PMTUDISC_DO;  // DF: IP ID 0, as the ICRC assumes
    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &df, sizeof df);
    any.ss_family = AF_INET;
    len = sizeof(sockaddr_in);
  } else {
    int df = IPV6_PMTUDISC_DO;
    setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &df, sizeof df);
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
    any.ss_family = AF_INET6;
    len = sizeof(sockaddr_in6);
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&any), len) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&any), &len) != 0) {
    close(fd);
    return s;
  }
  s.fd = fd;
  s.port = v4 ? ntohs(reinterpret_cast<sockaddr_in*>(&any)->sin_port)
              : ntohs(reinterpret_cast<sockaddr_in6*>(&any)->sin6_port);
  return s;
}

// Whether `a` is an address of this host (a device here has it as a GID).
bool is_local_address(const in6_addr& a) {
  sockaddr_in6 sin6{};
  sin6.sin6_family = AF_INET6;
  sin6.sin6_addr = a;
  Device* device;
  int index;
  return find_device(reinterpret_cast<const sockaddr*>(&sin6), &device, &index);
}

// One MAD to QP1 of `dst`, from `src` (the source address is chosen with
// IP_PKTINFO: the ICRC covers it).
bool send_to_qp1(const in6_addr& src, const in6_addr& dst, uint8_t tclass, const uint8_t* mad) {
  const bool v4 = IN6_IS_ADDR_V4MAPPED(&dst);
  MadSocket& s = mad_socket(v4);
  if (s.fd < 0) return false;
  static uint32_t psn = rng()();
  net::RocePacket pkt;
  pkt.bth.opcode = net::kTransportUd | net::kSendOnly;
  pkt.bth.dest_qp = ibcm::kGsiQpn;
  pkt.bth.psn = psn++ & 0xffffff;
  pkt.deth.qkey = ibcm::kGsiQkey;
  pkt.deth.src_qp = ibcm::kGsiQpn;
  uint8_t buf[net::kDatagramHeadroom + net::kDatagramOverhead + ibcm::kMadSize];
  net::DatagramAddrs a;
  a.src_ip = src;
  a.dst_ip = dst;
  a.src_port = s.port;
  a.dst_port = net::kRoceUdpPort;
  const size_t n = net::build_datagram(a, pkt, mad, ibcm::kMadSize, buf);
  if (!n) return false;
  // To this host: through the host service when one runs (it drops UDP
  // from this host's own addresses, which any local user could forge).
  if (is_local_address(dst) && send_local_datagram(src, s.port, dst, tclass, buf + net::kDatagramHeadroom, n))
    return true;

  sockaddr_storage to{};
  socklen_t to_len;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(in6_pktinfo)) + CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  iovec iov{buf + net::kDatagramHeadroom, n};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  cmsghdr* c;
  if (v4) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&to);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(net::kRoceUdpPort);
    std::memcpy(&sin->sin_addr, &dst.s6_addr[12], 4);
    to_len = sizeof *sin;
    msg.msg_controllen = CMSG_SPACE(sizeof(in_pktinfo)) + CMSG_SPACE(sizeof(int));
    c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = IPPROTO_IP;
    c->cmsg_type = IP_PKTINFO;
    c->cmsg_len = CMSG_LEN(sizeof(in_pktinfo));
    in_pktinfo info{};
    std::memcpy(&info.ipi_spec_dst, &src.s6_addr[12], 4);
    std::memcpy(CMSG_DATA(c), &info, sizeof info);
    c = CMSG_NXTHDR(&msg, c);
    c->cmsg_level = IPPROTO_IP;
    c->cmsg_type = IP_TOS;
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&to);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(net::kRoceUdpPort);
    sin6->sin6_addr = dst;
    to_len = sizeof *sin6;
    msg.msg_controllen = CMSG_SPACE(sizeof(in6_pktinfo)) + CMSG_SPACE(sizeof(int));
    c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = IPPROTO_IPV6;
    c->cmsg_type = IPV6_PKTINFO;
    c->cmsg_len = CMSG_LEN(sizeof(in6_pktinfo));
    in6_pktinfo info{};
    info.ipi6_addr = src;
    std::memcpy(CMSG_DATA(c), &info, sizeof info);
    c = CMSG_NXTHDR(&msg, c);
    c->cmsg_level = IPPROTO_IPV6;
    c->cmsg_type = IPV6_TCLASS;
  }
  const int tc = tclass;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &tc, sizeof tc);
  msg.msg_name = &to;
  msg.msg_namelen = to_len;
  return sendmsg(s.fd, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
}

// The files of the mailboxes this process bound (fd -> path), removed when
// they close; pid: a fork()ed child closing its copies leaves them be.
struct BoundMailboxes : PrivateHeapObject {
  std::mutex mu;
  PrivateUnorderedMap<int, std::string> paths;
  pid_t pid = getpid();
};
BoundMailboxes& bound_mailboxes() {
  static auto* b = new BoundMailboxes;  // (never freed: used until exit)
  return *b;
}

void remove_mailbox_files() {
  BoundMailboxes& b = bound_mailboxes();
  std::lock_guard g(b.mu);
  if (b.pid != getpid()) return;
  for (const auto& [fd, path] : b.paths) unlink(path.c_str());
  b.paths.clear();
}

// True when the socket file at `path` has no one behind it: left by a
// process that was killed.
bool stale_socket_file(const char* path) {
  int probe = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (probe < 0) return false;
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  std::memcpy(un.sun_path, path, std::min(std::strlen(path), sizeof un.sun_path - 1));
  const bool stale = connect(probe, reinterpret_cast<sockaddr*>(&un), sizeof un) != 0 && errno == ECONNREFUSED;
  close(probe);
  return stale;
}

// Held (flock) while a stale mailbox file is found and removed, by the
// sweep below and by a bind taking a stale file over: else a sweep that
// found a file stale could remove the one a takeover has just bound.
class StaleFileLock {
 public:
  explicit StaleFileLock(const std::string& dir) {
    fd_ = open((dir + "/gsi.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ >= 0) flock(fd_, LOCK_EX);
  }
  ~StaleFileLock() {
    if (fd_ >= 0) close(fd_);  // (releases the lock)
  }
  StaleFileLock(const StaleFileLock&) = delete;
  StaleFileLock& operator=(const StaleFileLock&) = delete;

 private:
  int fd_ = -1;
};

// A datagram socket bound to mailbox `name` (ibcm::mailbox_address); -1
// with errno (EADDRINUSE: a live mailbox has it).
int bind_mailbox(const std::string& name) {
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  socklen_t len;
  const sockaddr_un un = ibcm::mailbox_address(name, &len);
  const bool file = un.sun_path[0] != 0;
  // Who may send to it: for a file, only we (the runtime directory is
  // ours alone); for an abstract name anyone, so read_mailbox keeps only
  // MADs our own processes posted, by the kernel's word on the sender.
  int rc = sv::pass_credentials(fd) ? bind(fd, reinterpret_cast<const sockaddr*>(&un), len) : -1;
  if (rc != 0 && errno == EADDRINUSE && file) {
    std::string dir, prefix;
    if (ibcm::mailbox_files(&dir, &prefix)) {
      StaleFileLock lock(dir);
      if (stale_socket_file(un.sun_path)) {
        unlink(un.sun_path);
        rc = bind(fd, reinterpret_cast<const sockaddr*>(&un), len);
      } else {
        errno = EADDRINUSE;
      }
    }
  }
  // With a host service, the MADs for this mailbox come to our user only
  // once it is claimed there; another user's claim is a port in use.
  if (rc == 0) rc = claim_mailbox(fd, name);
  if (rc != 0) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  if (file) {
    // At exit, the files of the mailboxes still open go. Registered before
    // any orphan's linger (atexit runs in reverse), so it runs after it.
    static bool cleanup = (std::atexit(remove_mailbox_files), true);
    (void)cleanup;
    BoundMailboxes& b = bound_mailboxes();
    std::lock_guard g(b.mu);
    b.paths[fd] = un.sun_path;
  }
  return fd;
}

// Closes a mailbox, and removes its file if this process made it.
void close_mailbox(int fd) {
  release_mailbox(fd);
  BoundMailboxes& b = bound_mailboxes();
  {
    std::lock_guard g(b.mu);
    if (auto it = b.paths.find(fd); it != b.paths.end()) {
      if (b.pid == getpid()) unlink(it->second.c_str());
      b.paths.erase(it);
    }
  }
  close(fd);
}

// A destroyed id whose DREQ is not answered yet: its comm ID stays taken
// (an orphan in ProcessNet::ids) until the DREP comes.
struct Orphan {
  uint32_t comm_id;
  in6_addr local_ip, peer_ip;
  uint8_t tos;
  std::array<uint8_t, ibcm::kMadSize> dreq;
};

// A mailbox of the process's ids: comm IDs (prefix << 16) | L are its.
struct IdMailbox : PrivateHeapObject {
  int fd = -1;
  uint32_t prefix = 0;
  unsigned used = 0;  // comm IDs registered (ids and orphans)
  SharedWatch watch;  // in the channels of the ids that use it
};

// The network state of the process: fds shared by all its ids, so an id
// holds none.
struct ProcessNet : PrivateHeapObject {
  pid_t pid = getpid();
  // One mailbox; another once the first's comm IDs are all in use.
  PrivateVector<IdMailbox*> mailboxes;
  // Each local comm ID in use: its id, or nullptr for an orphan.
  PrivateUnorderedMap<uint32_t, Id*> ids;
  PrivateDeque<Orphan> orphans;
  // The retry timer: armed for the earliest of the ids' deadlines.
  int timer_fd = -1;
  SharedWatch timer;
  PrivateSet<std::pair<uint64_t, Id*>> deadlines;
};

ProcessNet& process_net() {
  static ProcessNet* p = nullptr;
  // A fork child makes its own (as mad_socket): it must not read the
  // parent's mailbox or timer. The parent's fds it leaves be.
  if (!p || p->pid != getpid()) p = new ProcessNet;
  return *p;
}

IdMailbox* mailbox_of(uint32_t comm_id) {
  for (IdMailbox* m : process_net().mailboxes)
    if (m->prefix == comm_id >> 16) return m;
  return nullptr;
}

// Whether `id` holds a comm ID in this process's table (and so uses its
// shared watches).
bool joined(const Id* id) {
  const ProcessNet& p = process_net();
  auto it = p.ids.find(id->net.local_comm_id);
  return id->net.local_comm_id && it != p.ids.end() && it->second == id;
}

// Mailbox files left by processes killed before they could remove them:
// any of this network namespace's mailboxes (ids' and listeners') that
// nobody is bound to.
void remove_stale_mailbox_files() {
  std::string dir, prefix;
  if (!ibcm::mailbox_files(&dir, &prefix)) return;
  StaleFileLock lock(dir);
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  while (const dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) != 0) continue;
    const std::string path = dir + "/" + e->d_name;
    if (stale_socket_file(path.c_str())) unlink(path.c_str());
  }
  closedir(d);
}

// Binds another id mailbox for the process, with a random prefix nobody
// holds. Null with errno.
IdMailbox* open_id_mailbox() {
  ProcessNet& p = process_net();
  if (p.mailboxes.empty()) remove_stale_mailbox_files();  // once per process
  for (int attempt = 0; attempt < 100; ++attempt) {
    const uint32_t prefix = rng()() & 0xffff;
    if (mailbox_of(prefix << 16)) continue;
    int fd = bind_mailbox(ibcm::comm_id_mailbox(prefix << 16));
    if (fd < 0 && errno == EADDRINUSE) continue;
    if (fd < 0) return nullptr;
    auto* m = new IdMailbox;
    m->fd = fd;
    m->prefix = prefix;
    m->watch.kind = WatchKind::kProcessMailbox;
    m->watch.fd = fd;
    p.mailboxes.push_back(m);
    return m;
  }
  errno = EADDRINUSE;
  return nullptr;
}

// A fresh local comm ID for `id` (never 0), in the process's table; its
// channel then watches the mailbox and the retry timer. 0, or -1 with errno.
int join_process_net(Id* id) {
  if (joined(id)) return 0;
  ProcessNet& p = process_net();
  if (p.timer_fd < 0) {
    p.timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (p.timer_fd < 0) return -1;
    p.timer.kind = WatchKind::kRetryTimers;
    p.timer.fd = p.timer_fd;
  }
  IdMailbox* box = nullptr;
  for (IdMailbox* m : p.mailboxes) {
    if (m->used < (m->prefix ? 0x10000u : 0xffffu)) {  // (prefix 0: comm ID 0 is not one)
      box = m;
      break;
    }
  }
  if (!box && !(box = open_id_mailbox())) return -1;
  uint32_t low = rng()() & 0xffff;
  for (;; low = (low + 1) & 0xffff) {
    const uint32_t comm_id = box->prefix << 16 | low;
    if (comm_id && p.ids.try_emplace(comm_id, id).second) {
      ++box->used;
      id->net.local_comm_id = comm_id;
      break;
    }
  }
  Channel* ch = channel_of(id->pub.channel);
  box->watch.attach(ch);
  p.timer.attach(ch);
  return 0;
}

void release_comm_id(uint32_t comm_id) {
  ProcessNet& p = process_net();
  if (p.ids.erase(comm_id))
    if (IdMailbox* m = mailbox_of(comm_id)) --m->used;
}

void orphan_answered(uint32_t comm_id) {
  std::erase_if(process_net().orphans, [&](const Orphan& o) { return o.comm_id == comm_id; });
  release_comm_id(comm_id);
}

void adopt_orphan(Orphan o);

// Sets the process's timer for the earliest deadline (off when none).
void arm_process_timer() {
  ProcessNet& p = process_net();
  if (p.timer_fd < 0) return;
  itimerspec spec{};
  if (!p.deadlines.empty()) {
    const uint64_t at = p.deadlines.begin()->first;
    spec.it_value.tv_sec = static_cast<time_t>(at / 1000000000u);
    spec.it_value.tv_nsec = static_cast<long>(at % 1000000000u);
  }
  timerfd_settime(p.timer_fd, TFD_TIMER_ABSTIME, &spec, nullptr);
}

void stop_retrying(Id* id) {
  NetLink& n = id->net;
  n.awaiting = false;
  // (The timer may still fire for it: on_retry_timers finds nothing due.)
  if (n.retry_at_ns) process_net().deadlines.erase({n.retry_at_ns, id});
  n.retry_at_ns = 0;
}

void arm_retry(Id* id, int ms) {
  NetLink& n = id->net;
  ProcessNet& p = process_net();
  if (n.retry_at_ns) p.deadlines.erase({n.retry_at_ns, id});
  n.retry_at_ns = sv::monotonic_ns() + uint64_t(ms) * 1000000u;
  auto it = p.deadlines.emplace(n.retry_at_ns, id).first;
  if (it == p.deadlines.begin()) arm_process_timer();
}

// The id leaves the process's table (an orphan keeps its comm ID), and its
// channel stops watching what it no longer uses.
void leave_process_net(Id* id, const Orphan* orphan) {
  stop_retrying(id);
  if (!joined(id)) return;
  ProcessNet& p = process_net();
  const uint32_t comm_id = id->net.local_comm_id;
  Channel* ch = channel_of(id->pub.channel);
  mailbox_of(comm_id)->watch.detach(ch);
  p.timer.detach(ch);
  if (orphan) {
    p.ids[comm_id] = nullptr;
    adopt_orphan(*orphan);
  } else {
    release_comm_id(comm_id);
  }
}

bool send_mad(Id* id, const ibcm::CmMessage& mad, std::array<uint8_t, ibcm::kMadSize>* copy = nullptr) {
  const auto bytes = ibcm::encode(mad);
  if (copy) *copy = bytes;
  return send_to_qp1(id->net.local_ip, id->net.peer_ip, id->tos, bytes.data());
}

// Messages that wait for an answer from the peer's CM.
bool expects_answer(MessageType t) {
  return t == MessageType::kReq || t == MessageType::kSidrReq || t == MessageType::kRep || t == MessageType::kDreq;
}

void answer_dreq(Id* id) {
  ibcm::CmMessage drep;
  drep.transaction_id = id->net.transaction_id;
  ibcm::Drep d;
  d.local_comm_id = id->net.local_comm_id;
  d.remote_comm_id = id->net.remote_comm_id;
  drep.body = d;
  send_mad(id, drep);
}

// Reads one mailbox datagram; false when none is there.
bool read_mailbox(int fd, ibcm::MailboxHeader* from, ibcm::CmMessage* mad) {
  for (;;) {
    uint8_t buf[ibcm::kMailboxDatagram];
    iovec iov{buf, sizeof buf};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    sv::CredentialsBuffer creds;
    creds.attach(&msg);
    ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT);
    if (n < 0) return false;
    if (n != static_cast<ssize_t>(sizeof buf) || !sv::is_trusted_uid(sv::sender_uid(&msg))) continue;
    std::memcpy(from, buf, sizeof *from);
    if (from->magic != ibcm::MailboxHeader::kMagic) continue;
    if (ibcm::decode(std::span<const uint8_t>(buf + sizeof *from, ibcm::kMadSize), *mad) != ibcm::DecodeError::kNone)
      continue;
    return true;
  }
}

void on_id_mad(Id* id, const ibcm::MailboxHeader& from, const ibcm::CmMessage& mad);

// Reads the process's id mailboxes and hands each MAD to the id whose comm
// ID it names. `orphans_only` (at exit): just the answers orphans wait for.
void read_id_mailboxes(bool orphans_only) {
  ProcessNet& p = process_net();
  ibcm::MailboxHeader from;
  ibcm::CmMessage mad;
  for (size_t i = 0; i < p.mailboxes.size(); ++i) {
    while (read_mailbox(p.mailboxes[i]->fd, &from, &mad)) {
      const uint32_t comm_id = ibcm::receiver_comm_id(mad);
      auto it = p.ids.find(comm_id);
      const bool disconnect = std::get_if<ibcm::Drep>(&mad.body) || std::get_if<ibcm::Dreq>(&mad.body);
      if (it == p.ids.end()) {
        // An id that is gone. Its mailbox used to go with it, and the
        // transport answered for nobody (a DREP to a DREQ): so do we.
        if (auto answer = ibcm::answer_for_nobody(mad)) {
          in6_addr src, dst;
          std::memcpy(&src, from.dst_ip, 16);
          std::memcpy(&dst, from.src_ip, 16);
          send_to_qp1(src, dst, from.traffic_class, ibcm::encode(*answer).data());
        }
        continue;
      }
      if (!it->second) {
        if (disconnect) orphan_answered(comm_id);
      } else if (!orphans_only) {
        on_id_mad(it->second, from, mad);
      }
    }
  }
}

// At exit: each orphan's DREQ goes again (up to twice, 300 ms apart) until
// its DREP comes, so a peer whose DREQ was lost still learns of the end.
void linger_for_dreps() {
  CmLock lock(cm_mutex());
  ProcessNet& p = process_net();
  for (int round = 0; round < 3 && !p.orphans.empty(); ++round) {
    read_id_mailboxes(true);
    if (p.orphans.empty()) break;
    if (round)
      for (const Orphan& o : p.orphans) send_to_qp1(o.local_ip, o.peer_ip, o.tos, o.dreq.data());
    std::vector<pollfd> fds;
    for (const IdMailbox* m : p.mailboxes) fds.push_back(pollfd{m->fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 300);
  }
}

void adopt_orphan(Orphan o) {
  static bool registered = (std::atexit(linger_for_dreps), true);
  (void)registered;
  constexpr size_t kMaxOrphans = 64;  // the oldest give up first
  ProcessNet& p = process_net();
  if (p.orphans.size() == kMaxOrphans) {
    release_comm_id(p.orphans.front().comm_id);
    p.orphans.pop_front();
  }
  p.orphans.push_back(o);
}

// An id whose retry deadline came: its MAD goes again, or it fails.
void retry(Id* id) {
  NetLink& n = id->net;
  if (!n.awaiting) return;
  if (n.retries_left-- > 0) {
    send_to_qp1(n.local_ip, n.peer_ip, id->tos, n.pending.data());
    n.retry_ms = std::min(n.retry_ms * 2, kMaxRetryMs);
    arm_retry(id, n.retry_ms);
    return;
  }
  n.awaiting = false;
  switch (id->state) {
    case IdState::kConnectSent:
    case IdState::kAccepted:
      // Linux's CM: REQ or REP timed out (IB_CM_REQ_ERROR / IB_CM_REP_ERROR).
      set_state(id, IdState::kFailed, "no answer from the peer's CM after every retry");
      move_qp_to_error(id);
      queue_event(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
      break;
    default:
      break;  // a DREQ nobody answered: we are disconnected anyway
  }
}

// What a MAD from the peer's CM does to its id.
void on_id_mad(Id* id, const ibcm::MailboxHeader& from, const ibcm::CmMessage& mad) {
  NetLink& n = id->net;
  if (std::get_if<ibcm::Mra>(&mad.body)) {  // the peer needs longer: start the retries over
    if (n.awaiting) {
      n.retries_left = kRetries;
      arm_retry(id, kMaxRetryMs);
    }
    return;
  }
  if (std::get_if<ibcm::Drep>(&mad.body)) {
    stop_retrying(id);
    return;
  }
  auto msg = message_from_mad(mad, from);
  if (!msg) return;
  if (const auto* rep = std::get_if<ibcm::Rep>(&mad.body)) {
    if (id->state != IdState::kConnectSent) {
      // A repeated REP: our RTU was lost.
      if (n.sent_rtu) send_to_qp1(n.local_ip, n.peer_ip, id->tos, n.last_rtu.data());
      return;
    }
    n.remote_comm_id = rep->local_comm_id;
  } else if (const auto* rej = std::get_if<ibcm::Rej>(&mad.body)) {
    if (!n.remote_comm_id) n.remote_comm_id = rej->local_comm_id;
  }
  const bool dreq = msg->type == MessageType::kDreq;
  if (!dreq || n.pending_type != MessageType::kDreq) stop_retrying(id);  // crossing DREQs: still want our DREP
  handle(id, *msg);
  if (dreq) answer_dreq(id);
}

}  // namespace

bool is_remote(const Id* id) {
  Device* device;
  int index;
  const sockaddr* dst = &id->pub.route.addr.dst_addr;
  return !address_is_any(dst) && !find_device(dst, &device, &index);
}

int ensure_network(Device* device) {
  if (!device) return 0;
  if (device->anchor_qp) return 0;
  ibv_pd* pd = default_pd(device);
  if (!pd) return -1;
  device->anchor_cq = ibv_create_cq(device->context, 1, nullptr, nullptr, 0);
  if (!device->anchor_cq) return -1;
  ibv_qp_init_attr init{};
  init.qp_type = IBV_QPT_UD;
  init.send_cq = init.recv_cq = device->anchor_cq;
  init.cap.max_send_wr = init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(pd, &init);
  if (!qp) return -1;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = 1;
  attr.qkey = RDMA_UDP_QKEY;
  if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) != 0) return -1;
  attr = {};
  attr.qp_state = IBV_QPS_RTR;  // what makes the transport listen
  if (ibv_modify_qp(qp, &attr, IBV_QP_STATE) != 0) return -1;
  device->anchor_qp = qp;
  return 0;
}

int net_listen(Id* listener) {
  const sockaddr* addr = &listener->pub.route.addr.src_addr;
  if (!address_is_any(addr) && is_loopback(addr)) return 0;  // nobody else can reach it
  if (listener->net.listen_mailbox >= 0) return 0;
  Device* device = listener->device ? listener->device : first_device();
  if (ensure_network(device) != 0) return -1;
  int fd = bind_mailbox(bound_name(listener, addr, "gsi"));
  if (fd < 0) return -1;
  listener->net.listen_mailbox = fd;
  listener->net.listen_watch =
      watch_add(channel_of(listener->pub.channel), WatchKind::kListenMailbox, fd, listener);
  net_ids().push_back(listener);
  return 0;
}

int net_connect(Id* id, const WireMessage& req) {
  NetLink& n = id->net;
  n.active = true;
  n.peer_ip = ip_of(&id->pub.route.addr.dst_addr);
  n.local_ip = ip_of(&id->pub.route.addr.src_addr);
  n.transaction_id = (uint64_t{rng()()} << 32) | rng()();
  n.local_guid = be64toh(ibv_get_device_guid(id->pub.verbs->device));
  if (std::find(net_ids().begin(), net_ids().end(), id) == net_ids().end()) net_ids().push_back(id);
  if (ensure_network(id->device) != 0 || join_process_net(id) != 0) return -1;
  return net_send(id, req);
}

int net_send(Id* id, const WireMessage& msg) {
  auto mad = mad_from(id, msg);
  if (!mad) {
    errno = EINVAL;
    return -1;
  }
  NetLink& n = id->net;
  const bool waits = expects_answer(msg.type) && !(msg.type == MessageType::kRep && id->pub.qp_type == IBV_QPT_UD);
  bool ok = send_mad(id, *mad, waits ? &n.pending : msg.type == MessageType::kRtu ? &n.last_rtu : nullptr);
  if (msg.type == MessageType::kRtu) n.sent_rtu = true;
  if (waits) {
    n.pending_type = msg.type;
    n.awaiting = true;
    n.retries_left = kRetries;
    n.retry_ms = kFirstRetryMs;
    arm_retry(id, n.retry_ms);
  } else {
    stop_retrying(id);  // whatever we waited for was answered
  }
  // A lost datagram is what the retries are for; only a socket that cannot
  // send at all is an error.
  if (!ok && mad_socket(IN6_IS_ADDR_V4MAPPED(&n.peer_ip)).fd < 0) return -1;
  return 0;
}

void net_close(Id* id) {
  NetLink& n = id->net;
  bool orphan = false;
  if (n.active && joined(id)) {
    // Destroying a connected id disconnects it, as the kernel's CM does.
    if (id->state == IdState::kEstablished || id->state == IdState::kAccepted ||
        id->state == IdState::kResponseReceived) {
      WireMessage dreq = message_from(id, MessageType::kDreq);
      if (auto mad = mad_from(id, dreq)) {
        send_mad(id, *mad, &n.pending);
        n.awaiting = true;
        n.pending_type = MessageType::kDreq;
      }
    }
    // A DREQ not yet answered: the kernel's CM goes on sending it after the
    // id (and its process) are gone. Here the id's comm ID stays taken by
    // an orphan, and the process waits a little for the DREP at exit.
    orphan = n.awaiting && n.pending_type == MessageType::kDreq;
  }
  const Orphan o{n.local_comm_id, n.local_ip, n.peer_ip, id->tos, n.pending};
  leave_process_net(id, orphan ? &o : nullptr);
  watch_remove(n.listen_watch);
  if (n.listen_mailbox >= 0) close_mailbox(n.listen_mailbox);
  n.listen_mailbox = -1;
  std::erase(net_ids(), id);
}

void net_migrate(Id* id, Channel* from, Channel* to) {
  if (!joined(id)) return;
  for (SharedWatch* w : {&mailbox_of(id->net.local_comm_id)->watch, &process_net().timer}) {
    w->detach(from);
    w->attach(to);
  }
}

void on_process_mailbox_readable() { read_id_mailboxes(false); }

void on_retry_timers() {
  ProcessNet& p = process_net();
  uint64_t expirations;
  // (Nothing to read: another channel's pump read it, or the timer was
  // set again meanwhile. What is due is done all the same.)
  if (p.timer_fd >= 0) (void)!read(p.timer_fd, &expirations, sizeof expirations);
  const uint64_t now = sv::monotonic_ns();
  while (!p.deadlines.empty() && p.deadlines.begin()->first <= now) {
    Id* id = p.deadlines.begin()->second;
    p.deadlines.erase(p.deadlines.begin());
    id->net.retry_at_ns = 0;
    retry(id);  // (a new deadline is later than now)
  }
  arm_process_timer();
}

void on_listen_mailbox_readable(Id* listener) {
  ibcm::MailboxHeader from;
  ibcm::CmMessage mad;
  while (listener->net.listen_mailbox >= 0 && read_mailbox(listener->net.listen_mailbox, &from, &mad)) {
    uint32_t remote_comm_id = 0;
    uint64_t service_id = 0;
    if (const auto* req = std::get_if<ibcm::Req>(&mad.body)) {
      remote_comm_id = req->local_comm_id;
      service_id = req->service_id;
    } else if (const auto* sidr = std::get_if<ibcm::SidrReq>(&mad.body)) {
      remote_comm_id = sidr->request_id;
      service_id = sidr->service_id;
    } else {
      continue;
    }
    // A repeated request: the REP (or SIDR REP) we sent was lost, or is late.
    auto known = std::find_if(net_ids().begin(), net_ids().end(), [&](const Id* c) {
      return c != listener && c->net.active && c->net.remote_comm_id == remote_comm_id &&
             std::memcmp(&c->net.peer_ip, from.src_ip, 16) == 0;
    });
    if (known != net_ids().end()) {
      Id* child = *known;
      if (child->net.awaiting) send_to_qp1(child->net.local_ip, child->net.peer_ip, child->tos, child->net.pending.data());
      continue;
    }
    if (listener->state != IdState::kListening) continue;
    auto msg = message_from_mad(mad, from);
    if (!msg) continue;
    Id* child = on_request(listener, nullptr, *msg);
    if (!child) continue;
    NetLink& n = child->net;
    n.active = true;
    n.remote_comm_id = remote_comm_id;
    n.transaction_id = mad.transaction_id;
    n.service_id = service_id;
    std::memcpy(&n.peer_ip, from.src_ip, 16);
    std::memcpy(&n.local_ip, from.dst_ip, 16);
    if (child->pub.verbs) n.local_guid = be64toh(ibv_get_device_guid(child->pub.verbs->device));
    net_ids().push_back(child);
    if (join_process_net(child) != 0)
      set_state(child, IdState::kFailed, "no mailbox for the new id");  // rdma_accept will report it
  }
}

}  // namespace sv::rdmacm
