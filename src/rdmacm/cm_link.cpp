// Rendezvous and mailboxes between the processes of one host (cm_link.h):
// made, shared, read, watched for a dead peer, and closed when nobody uses
// them.
#include "cm_link.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "cm_address.h"
#include "cm_protocol.h"
#include "util/clock.h"
#include "util/file_limit.h"
#include "util/log.h"
#include "util/peer_credentials.h"
#include "util/unix_socket_address.h"

namespace sv::rdmacm {

// A connection to a listener's rendezvous socket (either end): the REQs on
// it wait for their answers.
struct Rendezvous : PrivateHeapObject {
  SharedWatch watch;
  // Accepting side: the listener whose requests it carries (null once it
  // is gone). Connecting side: the listener's name, while new connects
  // may reuse it.
  Id* listener = nullptr;
  std::string name;
  std::string peer_mailbox;                // the other process's, from its messages
  pid_t peer_pid = 0;                      // as the kernel says (0: in a pid namespace we cannot see)
  PrivateUnorderedMap<uint32_t, Id*> ids;  // unanswered, by link reference
  PrivateDeque<WireMessage> outbox;        // sent when the socket has room
  int pins = 0;                            // being read: not freed under the reader
  bool accepted = false;                   // the listener's end
};

// Another process of this host (or this one), reached at its mailbox: the
// ids whose REQs were answered talk to their peers there.
struct CmLink : PrivateHeapObject {
  std::string mailbox;  // its abstract name
  pid_t pid = 0;        // with its name, whether the process lives (0: unknown)
  PrivateUnorderedMap<uint32_t, Id*> ids;  // by link reference
  PrivateDeque<WireMessage> outbox;        // the peer's queue was full
  bool gone = false;                       // found dead: its ids learn it at the next tick
};

namespace {

constexpr int kLastWordsMs = 200;
constexpr int kLivenessMs = 1000;     // how late a killed peer's DISCONNECTED may come
constexpr int kOutboxRetryMs = 2;     // a full peer queue is tried again this soon
constexpr size_t kBatch = 64;         // messages a mailbox datagram carries at most
constexpr int kParkedRetryMs = 10;    // a REQ without a rendezvous tries again this soon
constexpr uint64_t kParkedLimitNs = 30'000'000'000;  // and gives up after this long

// The process's own mailbox, its timer and the probe that asks whether a
// peer's mailbox is still bound.
struct Mailbox {
  int fd = -1;
  std::string name;
  SharedWatch watch;
  int timer_fd = -1;
  SharedWatch timer;
  int armed_ms = 0;  // what the timer is set for now (0: off)
  int probe_fd = -1;
};

struct Parked {
  Id* id;
  uint64_t deadline_ns;
};

// The links of this process. A fork child inherits the parent's sockets
// but not its ids: it forgets the parent's state (reading or writing its
// sockets would take the parent's messages) and makes its own.
struct Links {
  PrivateMap<std::string, Rendezvous*> by_name;  // connecting side, for reuse
  PrivateVector<Rendezvous*> accepted;           // accepting side, found when their listener goes
  PrivateVector<Id*> paused;                     // listeners that could not take a connection
  PrivateMap<std::string, CmLink*> peers;        // by mailbox name
  PrivateUnorderedMap<uint32_t, Id*> by_ref;     // every id on a rendezvous or a link
  PrivateVector<Parked> parked;                  // REQs waiting for a rendezvous
  // Mailbox messages that came before their id's answer on its rendezvous
  // (the answer waited in the peer's outbox): read once it has come.
  PrivateVector<WireMessage> early;
  size_t outgoing = 0, incoming = 0;             // rendezvous open, each way
  Mailbox mailbox;
};

// Set in a fork child (pthread_atfork): links() would otherwise ask
// getpid() on every call, a system call each time on the CM's paths.
bool forked_since_links = true;

Links& links() {
  static auto* l = [] {
    pthread_atfork(nullptr, nullptr, [] { forked_since_links = true; });
    return new_private<Links>();
  }();
  if (forked_since_links) {
    forked_since_links = false;
    l->by_name.clear();
    l->accepted.clear();
    l->paused.clear();
    l->peers.clear();
    l->by_ref.clear();
    l->parked.clear();
    l->early.clear();
    l->mailbox = Mailbox{};
    l->outgoing = l->incoming = 0;
  }
  return *l;
}

// Process-unique references for ids on links (0 names the listener).
uint32_t next_ref() {
  static uint32_t ref = 0;
  do {
    if (++ref == 0) ++ref;
  } while (links().by_ref.count(ref));
  return ref;
}

// ---------------------------------------------------------------- mailbox

void arm_timer(int ms) {
  Mailbox& m = links().mailbox;
  if (m.timer_fd < 0 || m.armed_ms == ms) return;
  itimerspec spec{};
  spec.it_value.tv_sec = ms / 1000;
  spec.it_value.tv_nsec = (ms % 1000) * 1'000'000L;
  timerfd_settime(m.timer_fd, 0, &spec, nullptr);
  m.armed_ms = ms;
}

// Sooner than it is set for (or set at all).
void arm_timer_within(int ms) {
  const int now = links().mailbox.armed_ms;
  if (now == 0 || now > ms) arm_timer(ms);
}

// Binds the process's mailbox (once): false with errno.
bool ensure_mailbox() {
  Mailbox& m = links().mailbox;
  if (m.fd >= 0) return true;
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  int probe = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  bool ok = fd >= 0 && timer >= 0 && probe >= 0 && sv::pass_credentials(fd);
  // Every datagram in a peer's queue counts against our send buffer: as
  // much as the system allows (net.core.wmem_max), for bursts of RTUs.
  int sndbuf = 4 << 20;
  if (ok) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  std::string name;
  if (ok) {
    // A random part nobody can guess before it is bound: another user who
    // binds a name first takes no message of ours.
    static std::mt19937_64 rng{std::random_device{}()};
    char buf[kMailboxNameSize];
    for (int attempt = 0;; ++attempt) {
      std::snprintf(buf, sizeof buf, "sv-cm-mbox-%d-%016llx", static_cast<int>(getpid()),
                    static_cast<unsigned long long>(rng()));
      socklen_t len;
      const sockaddr_un un = sv::abstract_unix_address(buf, &len);
      if (bind(fd, reinterpret_cast<const sockaddr*>(&un), len) == 0) break;
      if (errno != EADDRINUSE || attempt == 8) {
        ok = false;
        break;
      }
    }
    name = buf;
  }
  if (!ok) {
    const int err = errno;
    for (int f : {fd, timer, probe})
      if (f >= 0) close(f);
    errno = err;
    return false;
  }
  m.fd = fd;
  m.name = name;
  m.watch.kind = WatchKind::kLocalMailbox;
  m.watch.fd = fd;
  m.timer_fd = timer;
  m.timer.kind = WatchKind::kLinkTimer;
  m.timer.fd = timer;
  m.probe_fd = probe;
  return true;
}

// Whether the process behind `link` lives: its mailbox is still bound and
// its pid still runs (both: a name freed at its death and bound again by
// someone else, or a pid used again, is not it).
bool peer_alive(const CmLink* link) {
  Mailbox& m = links().mailbox;
  if (link->mailbox == m.name) return true;
  if (link->pid > 0 && kill(link->pid, 0) != 0 && errno == ESRCH) return false;
  socklen_t len;
  const sockaddr_un un = sv::abstract_unix_address(link->mailbox, &len);
  const bool gone = connect(m.probe_fd, reinterpret_cast<const sockaddr*>(&un), len) != 0 && errno == ECONNREFUSED;
  sockaddr unspec{};
  unspec.sa_family = AF_UNSPEC;
  connect(m.probe_fd, &unspec, sizeof unspec);  // (holds no reference to it)
  return !gone;
}

CmLink* peer_link(const std::string& mailbox, pid_t pid) {
  auto& peers = links().peers;
  if (auto it = peers.find(mailbox); it != peers.end()) return it->second;
  auto* link = new CmLink;
  link->mailbox = mailbox;
  link->pid = pid;
  peers.emplace(mailbox, link);
  arm_timer_within(kLivenessMs);
  return link;
}

// Sends what waits in the link's outbox; true when it is empty.
bool flush(CmLink* link) {
  Mailbox& m = links().mailbox;
  socklen_t len;
  const sockaddr_un to = sv::abstract_unix_address(link->mailbox, &len);
  while (!link->outbox.empty()) {
    // Up to kBatch messages a datagram: the peer's queue holds 512
    // datagrams (net.unix.max_dgram_qlen), and each costs a system call on
    // either side.
    iovec iov[kBatch];
    size_t count = 0;
    for (auto it = link->outbox.begin(); it != link->outbox.end() && count < kBatch; ++it)
      iov[count++] = {&*it, sizeof(WireMessage)};
    msghdr mh{};
    mh.msg_name = const_cast<sockaddr_un*>(&to);
    mh.msg_namelen = len;
    mh.msg_iov = iov;
    mh.msg_iovlen = count;
    ssize_t n = sendmsg(m.fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR || errno == ENOBUFS)) {
      arm_timer_within(kOutboxRetryMs);
      return false;
    }
    if (n < 0 && (errno == ECONNREFUSED || errno == ENOENT)) {
      // Its mailbox is gone: so is the process. Its ids learn it at the
      // next tick, not under the caller, who may be mid-way through a change.
      link->gone = true;
      link->outbox.clear();
      arm_timer_within(1);
      return true;
    }
    link->outbox.erase(link->outbox.begin(), link->outbox.begin() + static_cast<std::ptrdiff_t>(count));
  }
  return true;
}

void send_to_peer(CmLink* link, const WireMessage& msg) {
  if (link->gone) return;
  link->outbox.push_back(msg);
  std::snprintf(link->outbox.back().sender_mailbox, kMailboxNameSize, "%s", links().mailbox.name.c_str());
  if (link->outbox.size() == 1) flush(link);
}

// Sends what waits in the outboxes of `peers`, waiting for them to read for
// as long as they do, until they read nothing for `stall_ms`: an id's last words
// (its GONE, DREQ, or RTUs still queued) must not die with it, and nobody
// may pump this side's channels again (the process may be about to exit).
// A peer that reads slowly still gets them all (10000 RTUs and DREQs took
// cmtime's server ~1 s: a fixed 200 ms lost most, and its children failed
// with CONNECT_ERROR); one that reads nothing, or one in this same process
// (it cannot read while we hold the CM lock), costs `stall_ms`.
template <typename LinkList>
void flush_waiting(const LinkList& peers, int stall_ms) {
  auto waiting = [&] {  // messages that wait for peers that live
    size_t n = 0;
    for (CmLink* link : peers)
      if (!link->gone && !flush(link)) n += link->outbox.size();
    return n;
  };
  size_t left = waiting();
  for (int stalled_us = 0; left && stalled_us < stall_ms * 1000;) {
    usleep(500);
    const size_t now = waiting();
    stalled_us = now < left ? 0 : stalled_us + 500;
    left = std::min(left, now);
  }
}

void maybe_free(CmLink* link) {
  if (!link->ids.empty()) return;
  flush_waiting(std::initializer_list<CmLink*>{link}, kLastWordsMs);
  links().peers.erase(link->mailbox);
  delete link;
}

void join_link(Id* id, CmLink* link) {
  id->link = link;
  link->ids.emplace(id->link_ref, id);
  Channel* ch = channel_of(id->pub.channel);
  links().mailbox.watch.attach(ch);
  links().mailbox.timer.attach(ch);
}

void leave_link(Id* id) {
  CmLink* link = id->link;
  link->ids.erase(id->link_ref);
  id->link = nullptr;
  Channel* ch = channel_of(id->pub.channel);
  links().mailbox.watch.detach(ch);
  links().mailbox.timer.detach(ch);
  maybe_free(link);
}

// The peer process died: every id it had with us learns its peer is gone.
void on_peer_process_gone(CmLink* link) {
  link->gone = true;
  link->outbox.clear();
  PrivateVector<Id*> ids;
  for (auto& [ref, id] : link->ids) ids.push_back(id);
  if (ids.empty()) return maybe_free(link);
  for (Id* id : ids) on_peer_gone(id);  // (each leaves the link; the last frees it)
}

// ------------------------------------------------------------- rendezvous

// Says at the default log level, once per `said`, that the process ran out
// of descriptors (err EMFILE or ENFILE) and what waits for one.
void warn_out_of_files_once(bool* said, int err, const char* what_waits) {
  if (*said || (err != EMFILE && err != ENFILE)) return;
  *said = true;
  SV_WARN("rdma_cm: out of file descriptors (RLIMIT_NOFILE %llu): %s", sv::file_limit(), what_waits);
}

// A listener whose process is out of file descriptors, or has its budget
// of rendezvous open (rendezvous_budget), takes no more for now: the
// connect waits in its socket's queue. The socket leaves
// the channel's epoll set meanwhile (level-triggered, it would wake every
// pump at once: 11000 failed accepts in 8 s), and comes back when a
// rendezvous of ours closes or the application next asks for an event
// (link_resume_accepting).
void pause_accepting(Id* listener, int err) {
  static bool said = false;
  warn_out_of_files_once(&said, err,
                         "a connect from another process of this host waits until one is free (each process "
                         "whose request this one has not answered yet takes one)");
  watch_remove(listener->sock_watch);
  auto& paused = links().paused;
  if (std::find(paused.begin(), paused.end(), listener) == paused.end()) paused.push_back(listener);
}

Rendezvous* rendezvous_new(int fd) {
  auto* rv = new Rendezvous;
  ucred peer{};
  socklen_t len = sizeof peer;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) == 0) rv->peer_pid = peer.pid;
  rv->watch.kind = WatchKind::kRendezvous;
  rv->watch.fd = fd;
  rv->watch.object = rv;
  return rv;
}

void forget_name(Rendezvous* rv) {
  if (rv->name.empty()) return;
  auto it = links().by_name.find(rv->name);
  if (it != links().by_name.end() && it->second == rv) links().by_name.erase(it);
  rv->name.clear();
}

bool flush(Rendezvous* rv);
void retry_parked();
bool is_parked(const Id* id);
void unpark(Id* id);

// Closes a rendezvous nobody uses any more. What its last ids said (GONE,
// REJ) goes first, for a moment at most: nobody may pump this side's
// channels again, and a reader in this same process cannot drain it while
// we hold the CM lock. Whatever is left, the peer learns from the EOF.
void maybe_free(Rendezvous* rv) {
  if (!rv->ids.empty() || rv->listener || rv->pins) return;
  for (int waited_ms = 0; !flush(rv) && waited_ms < kLastWordsMs; waited_ms += 10) {
    pollfd out{rv->watch.fd, POLLOUT, 0};
    poll(&out, 1, 10);
  }
  forget_name(rv);
  std::erase(links().accepted, rv);
  --(rv->accepted ? links().incoming : links().outgoing);
  rv->watch.detach_all();
  close(rv->watch.fd);
  delete rv;
  link_resume_accepting();  // (an fd is free)
  retry_parked();
}

// Sends what waits in the outbox; true when it is empty.
bool flush(Rendezvous* rv) {
  while (!rv->outbox.empty()) {
    ssize_t n = send(rv->watch.fd, &rv->outbox.front(), sizeof(WireMessage), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;
    // A broken rendezvous: its reader sees EOF and reports the peers gone.
    rv->outbox.pop_front();
  }
  return true;
}

void send_on(Rendezvous* rv, const WireMessage& msg) {
  rv->outbox.push_back(msg);
  std::snprintf(rv->outbox.back().sender_mailbox, kMailboxNameSize, "%s", links().mailbox.name.c_str());
  if (flush(rv)) return;
  if (!(rv->watch.events & EPOLLOUT)) rv->watch.set_events(EPOLLIN | EPOLLOUT);
}

void join_rendezvous(Id* id, Rendezvous* rv) {
  id->rendezvous = rv;
  rv->ids.emplace(id->link_ref, id);
  rv->watch.attach(channel_of(id->pub.channel));
}

void leave_rendezvous(Id* id) {
  Rendezvous* rv = id->rendezvous;
  rv->ids.erase(id->link_ref);
  id->rendezvous = nullptr;
  rv->watch.detach(channel_of(id->pub.channel));
  maybe_free(rv);
}

// The REQ is answered: the id talks to its peer at the peer's mailbox now.
void move_to_mailbox(Id* id, const std::string& peer_mailbox, pid_t peer_pid) {
  Rendezvous* rv = id->rendezvous;
  if (!rv) return;
  ++rv->pins;  // (not freed before the caller is done with it)
  leave_rendezvous(id);
  if (!peer_mailbox.empty()) join_link(id, peer_link(peer_mailbox, peer_pid));
  --rv->pins;
  maybe_free(rv);
}

// Reads one message; 1 on a message, 0 when nothing is there, -1 at EOF.
int receive(int fd, WireMessage* msg) {
  ssize_t n = recv(fd, msg, sizeof *msg, MSG_DONTWAIT);
  if (n < 0) return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
  if (n == 0) return -1;
  if (static_cast<size_t>(n) != sizeof *msg || msg->magic != WireMessage::kMagic) return 2;  // ignored
  msg->sender_mailbox[kMailboxNameSize - 1] = '\0';
  return 1;
}

// A request the rendezvous' listener cannot take (gone, or not listening):
// the answer a CM gives for a port nobody listens on.
void refuse(Rendezvous* rv, const WireMessage& req) {
  WireMessage answer;
  answer.type = req.type == MessageType::kSidrReq ? MessageType::kSidrRep : MessageType::kRej;
  answer.reason = req.type == MessageType::kSidrReq ? 2 /* IB_SIDR_UNSUPPORTED */ : kRejInvalidServiceId;
  answer.receiver_ref = req.sender_ref;
  send_on(rv, answer);
}

// An unanswered REQ whose listener went: it goes to whoever listens on the
// name now, over a new rendezvous (a listener closed and opened again, as
// perftest's server does between its phases), or is rejected as a REQ to a
// port nobody listens on is.
void send_again(Id* id) {
  link_leave(id);
  if (link_connect(id) != 0) connect_refused(id);
  else if (link_send(id, id->waiting_req) != 0) reject_unanswered(id);
}

// The listener at the other end is gone: no new connects over it.
void on_listener_gone(Rendezvous* rv) {
  forget_name(rv);
  PrivateVector<Id*> waiting;
  for (auto& [ref, id] : rv->ids) waiting.push_back(id);
  for (Id* id : waiting) send_again(id);
}

// The other end closed: the peer process answered all (the usual close),
// exited, or was killed, or its listener went with our REQs unread.
void on_rendezvous_broken(Rendezvous* rv) {
  forget_name(rv);
  rv->outbox.clear();
  rv->listener = nullptr;
  PrivateVector<Id*> ids;
  for (auto& [ref, id] : rv->ids) ids.push_back(id);
  for (Id* id : ids) {  // each leaves the rendezvous
    if (id->state == IdState::kConnectSent) send_again(id);
    else on_peer_gone(id);
  }
  rv->watch.detach_all();  // nothing more to read
}

// The id of this process whose peer is the id `peer_ref` of the process
// behind `rv`: on the rendezvous still, or answered and at the mailbox.
Id* find_by_peer_ref(Rendezvous* rv, uint32_t peer_ref) {
  for (auto& [ref, id] : rv->ids)
    if (id->peer_ref == peer_ref) return id;
  if (auto it = links().peers.find(rv->peer_mailbox); it != links().peers.end())
    for (auto& [ref, id] : it->second->ids)
      if (id->peer_ref == peer_ref) return id;
  return nullptr;
}

void on_mailbox_message(const std::string& sender, const WireMessage& msg);

// What the peer sent `ref` at the mailbox before its answer came.
void hear_early(uint32_t ref) {
  auto& early = links().early;
  if (early.empty()) return;
  PrivateVector<WireMessage> mine;
  std::erase_if(early, [&](const WireMessage& m) {
    if (m.receiver_ref != ref) return false;
    mine.push_back(m);
    return true;
  });
  for (const WireMessage& m : mine) on_mailbox_message(m.sender_mailbox, m);
}

void on_rendezvous_message(Rendezvous* rv, const WireMessage& msg) {
  if (msg.sender_mailbox[0]) rv->peer_mailbox = msg.sender_mailbox;
  if (msg.receiver_ref == 0 && msg.type == MessageType::kGone) {
    if (msg.sender_ref == 0) return on_listener_gone(rv);
    // An id destroyed before it heard its REQ answered: found by its own ref.
    if (Id* id = find_by_peer_ref(rv, msg.sender_ref)) on_peer_gone(id);
    return;
  }
  if (msg.receiver_ref == 0) {
    if (msg.type != MessageType::kReq && msg.type != MessageType::kSidrReq) return;
    Id* listener = rv->listener;
    if (!listener || listener->state != IdState::kListening) return refuse(rv, msg);
    on_request(listener, rv, msg);
    return;
  }
  auto it = rv->ids.find(msg.receiver_ref);
  if (it == rv->ids.end()) return;  // an id that left (destroyed, or done)
  Id* id = it->second;
  if (id->peer_ref == 0) id->peer_ref = msg.sender_ref;  // the answer names the passive id
  if (msg.type == MessageType::kGone) return on_peer_gone(id);
  move_to_mailbox(id, std::string(rv->peer_mailbox), rv->peer_pid);  // (answered: REP, REJ, SIDR REP)
  handle(id, msg);
  hear_early(id->link_ref);
}

// Connects a fresh socket to listener `name`: the fd, or -1 with errno.
int connect_name(const std::string& name) {
  int fd = rendezvous_socket();
  if (fd < 0) return -1;
  socklen_t len;
  sockaddr_un un = unix_name(name, &len);
  if (connect(fd, reinterpret_cast<sockaddr*>(&un), len) != 0) {
    const int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  // The rendezvous name is abstract: any user could bind it first. Only a
  // listener of our own is one to talk to.
  if (!sv::is_trusted_uid(sv::peer_uid(fd))) {
    close(fd);
    errno = ECONNREFUSED;
    return -1;
  }
  return fd;
}

// ------------------------------------------------------------- descriptors

bool is_parked(const Id* id) {
  for (const Parked& p : links().parked)
    if (p.id == id) return true;
  return false;
}

void unpark(Id* id) {
  if (!std::erase_if(links().parked, [&](const Parked& p) { return p.id == id; })) return;
  links().mailbox.timer.detach(channel_of(id->pub.channel));
}

// The rendezvous a process keeps open at once, each way (to listeners, and
// from other processes to its own): an eighth of its file limit, so that
// requests arriving together leave the application its descriptors. One
// budget each way: a process that waits for answers still takes requests,
// so two that connect to each other never wait on each other.
size_t rendezvous_budget() { return sv::file_limit_share(8, 2, 4096); }

// A REQ that cannot have a rendezvous yet (the budget is spent, the process
// is out of descriptors, or the listener's backlog is full) waits for one
// of ours to close, or for the timer, as a CM's REQ waits in its retries.
void park(Id* id, int err) {
  static bool said = false;
  warn_out_of_files_once(&said, err,
                         "a connect to a listener of this host waits until one is free (each listener with a "
                         "request of ours not answered yet takes one)");
  links().parked.push_back({id, sv::monotonic_ns() + kParkedLimitNs});
  links().mailbox.timer.attach(channel_of(id->pub.channel));
  arm_timer_within(kParkedRetryMs);
}

// Parked REQs try again, oldest first, until one has to wait again; those
// parked too long fail as an unanswered REQ does, UNREACHABLE.
void retry_parked() {
  if (links().parked.empty()) return;
  const uint64_t now = sv::monotonic_ns();
  for (Parked p : PrivateVector<Parked>(links().parked)) {
    if (!is_parked(p.id)) continue;  // (another's failure handling took it)
    unpark(p.id);
    Id* id = p.id;
    if (id->state != IdState::kConnectSent) continue;
    if (link_connect(id) != 0) {
      connect_refused(id);
    } else if (is_parked(id)) {
      if (now < p.deadline_ns) {
        for (Parked& q : links().parked)
          if (q.id == id) q.deadline_ns = p.deadline_ns;
        break;  // (the rest would wait too)
      }
      unpark(id);
      set_state(id, IdState::kFailed, "no rendezvous for the REQ in time");
      queue_event(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
    } else if (link_send(id, id->waiting_req) != 0) {
      reject_unanswered(id);
    }
  }
  if (!links().parked.empty()) arm_timer_within(kParkedRetryMs);
}

}  // namespace

void link_join(Id* id, Rendezvous* via, uint32_t peer_ref) {
  id->link_ref = next_ref();
  id->peer_ref = peer_ref;
  links().by_ref.emplace(id->link_ref, id);
  join_rendezvous(id, via);
}

int link_connect(Id* id) {
  if (id->link || id->rendezvous || is_parked(id)) return 0;
  if (!ensure_mailbox()) return -1;
  for (const std::string& name : listener_names(id->pub.ps, &id->pub.route.addr.dst_addr)) {
    Rendezvous* rv = nullptr;
    if (auto it = links().by_name.find(name); it != links().by_name.end()) {
      rv = it->second;
    } else {
      if (links().outgoing >= rendezvous_budget()) {
        park(id, 0);
        return 0;
      }
      int fd = connect_name(name);
      if (fd < 0) {
        if (errno == ECONNREFUSED || errno == ENOENT) continue;
        if (errno == EMFILE || errno == ENFILE || errno == EAGAIN) {
          park(id, errno);
          return 0;
        }
        return -1;
      }
      rv = rendezvous_new(fd);
      rv->name = name;
      links().by_name.emplace(name, rv);
      ++links().outgoing;
    }
    link_join(id, rv, 0);
    return 0;
  }
  errno = ECONNREFUSED;
  return -1;
}

void link_accept(Id* listener) {
  if (!ensure_mailbox()) {  // (what follows our answers needs it)
    pause_accepting(listener, errno);
    return;
  }
  for (;;) {
    if (links().incoming >= rendezvous_budget()) return pause_accepting(listener, 0);
    int fd = accept4(listener->sock, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) pause_accepting(listener, errno);
      return;
    }
    // Anyone can connect to an abstract name: only our own processes'
    // requests are ones to take (another user's would be forged).
    if (!sv::is_trusted_uid(sv::peer_uid(fd))) {
      close(fd);
      continue;
    }
    Rendezvous* rv = rendezvous_new(fd);
    rv->listener = listener;
    rv->accepted = true;
    ++links().incoming;
    links().accepted.push_back(rv);
    rv->watch.attach(channel_of(listener->pub.channel));
  }
}

void link_resume_accepting() {
  auto& paused = links().paused;
  if (paused.empty()) return;
  for (Id* listener : PrivateVector<Id*>(std::move(paused))) {
    if (listener->state != IdState::kListening || listener->sock_watch || listener->sock < 0) continue;
    listener->sock_watch = watch_add(channel_of(listener->pub.channel), WatchKind::kListener, listener->sock, listener);
  }
  paused.clear();
}

void link_listener_gone(Id* listener) {
  std::erase(links().paused, listener);
  for (Rendezvous* rv : PrivateVector<Rendezvous*>(links().accepted)) {
    if (rv->listener != listener) continue;
    WireMessage gone;  // from nobody to nobody: the listener itself
    gone.type = MessageType::kGone;
    send_on(rv, gone);
    rv->listener = nullptr;
    rv->watch.detach(channel_of(listener->pub.channel));
    maybe_free(rv);
  }
}

int link_send(Id* id, const WireMessage& msg) {
  if (is_parked(id)) return 0;  // (its REQ goes when it has a rendezvous)
  if (!id->rendezvous && !id->link) {
    errno = ENOTCONN;
    return -1;
  }
  WireMessage out = msg;
  out.sender_ref = id->link_ref;
  out.receiver_ref = id->peer_ref;
  if (Rendezvous* rv = id->rendezvous) {
    send_on(rv, out);
    // The passive side's answer: what follows goes between the mailboxes.
    const bool answer = msg.type == MessageType::kRep || msg.type == MessageType::kRej ||
                        msg.type == MessageType::kSidrRep;
    if (answer && !rv->peer_mailbox.empty()) move_to_mailbox(id, std::string(rv->peer_mailbox), rv->peer_pid);
    return 0;
  }
  send_to_peer(id->link, out);
  return 0;
}

void link_leave(Id* id) {
  unpark(id);
  if (id->link_ref && !links().early.empty())
    std::erase_if(links().early, [&](const WireMessage& m) { return m.receiver_ref == id->link_ref; });
  if (id->rendezvous) leave_rendezvous(id);
  if (id->link) leave_link(id);
  if (id->link_ref) {
    auto it = links().by_ref.find(id->link_ref);
    if (it != links().by_ref.end() && it->second == id) links().by_ref.erase(it);
  }
}

void link_close(Id* id) {
  if (!id->rendezvous && !id->link) return unpark(id);
  // The peer learns the id is gone, as it read EOF on a socket of its own
  // (an id that sent no REQ yet has no peer: the message finds nobody).
  WireMessage gone;
  gone.type = MessageType::kGone;
  link_send(id, gone);
  link_leave(id);
}

void link_migrate(Id* id, Channel* from, Channel* to) {
  if (id->rendezvous) {
    id->rendezvous->watch.detach(from);
    id->rendezvous->watch.attach(to);
  }
  Mailbox& m = links().mailbox;
  if (id->link) {
    m.watch.detach(from);
    m.watch.attach(to);
  }
  if (id->link || is_parked(id)) {
    m.timer.detach(from);
    m.timer.attach(to);
  }
  for (Rendezvous* rv : links().accepted) {
    if (rv->listener != id) continue;
    rv->watch.detach(from);
    rv->watch.attach(to);
  }
}

void on_rendezvous_readable(Rendezvous* rv) {
  ++rv->pins;
  if ((rv->watch.events & EPOLLOUT) && flush(rv)) rv->watch.set_events(EPOLLIN);
  for (int budget = 256; budget > 0; --budget) {  // then the other channels' turn
    WireMessage msg;
    const int got = receive(rv->watch.fd, &msg);
    if (got == 0) break;
    if (got < 0) {
      on_rendezvous_broken(rv);
      break;
    }
    if (got == 1) on_rendezvous_message(rv, msg);
  }
  --rv->pins;
  maybe_free(rv);
}

void on_local_mailbox_readable() {
  Mailbox& m = links().mailbox;
  static auto* batch = new_private<std::array<WireMessage, kBatch>>();
  for (int budget = 16; budget > 0 && m.fd >= 0; --budget) {  // then the other channels' turn
    sockaddr_un from{};
    iovec iov{batch->data(), sizeof *batch};
    msghdr mh{};
    mh.msg_name = &from;
    mh.msg_namelen = sizeof from;
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    sv::CredentialsBuffer creds;
    creds.attach(&mh);
    ssize_t n = recvmsg(m.fd, &mh, MSG_DONTWAIT);
    if (n < 0) break;
    // Only our own processes' messages: anyone can send to an abstract name.
    if (n <= 0 || n % sizeof(WireMessage) != 0 || (mh.msg_flags & MSG_TRUNC) ||
        !sv::is_trusted_uid(sv::sender_uid(&mh)) || mh.msg_namelen <= offsetof(sockaddr_un, sun_path) + 1 ||
        from.sun_path[0] != '\0')
      continue;
    const std::string sender(from.sun_path + 1, mh.msg_namelen - offsetof(sockaddr_un, sun_path) - 1);
    // (Copied out: handling one may read the mailbox again, for the answer
    // it overtook.)
    PrivateVector<WireMessage> got(batch->begin(), batch->begin() + n / sizeof(WireMessage));
    for (const WireMessage& msg : got)
      if (msg.magic == WireMessage::kMagic) on_mailbox_message(sender, msg);
  }
}

namespace {

void on_mailbox_message(const std::string& sender, const WireMessage& msg) {
  auto it = links().by_ref.find(msg.receiver_ref);
  if (it == links().by_ref.end()) return;  // an id that left (destroyed, or done)
  Id* id = it->second;
  if (Rendezvous* rv = id->rendezvous) {
    // A message that overtook the answer on the rendezvous (the peer
    // disconnected at once): the answer first, if it is there yet.
    if (!rv->peer_mailbox.empty() && rv->peer_mailbox != sender) return;
    on_rendezvous_readable(rv);
    it = links().by_ref.find(msg.receiver_ref);
    if (it == links().by_ref.end() || it->second != id) return;
    if (id->rendezvous) {  // (not yet: it waits in the peer's outbox)
      WireMessage early = msg;
      std::snprintf(early.sender_mailbox, kMailboxNameSize, "%s", sender.c_str());
      links().early.push_back(early);
      return;
    }
  }
  if (!id->link || id->link->mailbox != sender) return;  // not its peer's
  if (msg.type == MessageType::kGone) on_peer_gone(id);
  else handle(id, msg);
}

}  // namespace

// At exit: what this process's ids still have to say to peers of this
// host goes first (RTUs queued for a full peer, the DREQs of a program that
// exits connected), as the kernel's CM would have sent it; peers that read
// nothing cost 200 ms in all.
__attribute__((destructor)) void flush_at_exit() {
  CmLock lock(cm_mutex(), std::try_to_lock);
  if (!lock.owns_lock()) return;  // (a thread of ours is mid-way: leave it)
  Links& l = links();
  if (l.mailbox.fd < 0) return;
  PrivateVector<CmLink*> peers;
  for (auto& [name, link] : l.peers) peers.push_back(link);
  flush_waiting(peers, kLastWordsMs);  // (all peers at once)
}

void on_link_timer() {
  Mailbox& m = links().mailbox;
  uint64_t expirations;
  if (m.timer_fd < 0) return;
  (void)!read(m.timer_fd, &expirations, sizeof expirations);
  m.armed_ms = 0;
  bool waiting = false;
  for (auto& [name, link] : PrivateMap<std::string, CmLink*>(links().peers)) {
    if (!links().peers.count(name)) continue;  // (freed by another's news)
    if (!link->gone && !link->outbox.empty() && !flush(link)) waiting = true;
    if (!link->gone && !link->ids.empty() && !peer_alive(link)) link->gone = true;
    if (link->gone) on_peer_process_gone(link);
    else if (link->ids.empty()) maybe_free(link);
  }
  retry_parked();
  if (waiting) arm_timer(kOutboxRetryMs);
  else if (!links().peers.empty() || !links().parked.empty()) arm_timer_within(kLivenessMs);
}

}  // namespace sv::rdmacm
