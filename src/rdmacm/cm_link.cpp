// Links between the processes of one host (cm_link.h): made, shared, read,
// and closed when nobody uses them.
#include "cm_link.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "cm_address.h"
#include "cm_protocol.h"
#include "util/log.h"
#include "util/peer_credentials.h"

namespace sv::rdmacm {

struct CmLink : PrivateHeapObject {
  SharedWatch watch;
  // Accepting side: the listener whose requests it carries (null once it
  // is gone). Connecting side: the listener's name, while new connects
  // may reuse the link.
  Id* listener = nullptr;
  std::string name;
  PrivateUnorderedMap<uint32_t, Id*> ids;  // by link reference
  PrivateDeque<WireMessage> outbox;        // sent when the socket has room
  int pins = 0;                            // being read: not freed under the reader
};

namespace {

constexpr int kLastWordsMs = 200;

// Process-unique references for ids on links (0 names the listener).
uint32_t next_ref() {
  static uint32_t ref = 0;
  if (++ref == 0) ++ref;
  return ref;
}

// The links of this process. A fork child inherits the parent's sockets
// but not its ids: it forgets the parent's links (reading or writing them
// would take the parent's messages) and makes its own.
struct Links {
  pid_t owner = 0;
  PrivateMap<std::string, CmLink*> by_name;  // connecting side, for reuse
  PrivateVector<CmLink*> accepted;           // accepting side, found when their listener goes
  PrivateVector<Id*> paused;                 // listeners that could not take a link (pause_accepting)
};

Links& links() {
  static auto* l = new_private<Links>();
  if (l->owner != getpid()) {
    l->by_name.clear();
    l->accepted.clear();
    l->paused.clear();
    l->owner = getpid();
  }
  return *l;
}

PrivateMap<std::string, CmLink*>& links_by_name() { return links().by_name; }
PrivateVector<CmLink*>& accepted_links() { return links().accepted; }
PrivateVector<Id*>& paused_listeners() { return links().paused; }

// A listener whose process is out of file descriptors cannot take a link:
// the connect waits in its socket's queue. The socket leaves the channel's
// epoll set meanwhile (level-triggered, it would wake every pump at once:
// 11000 failed accepts in 8 s), and comes back when a link of ours closes
// or the application next asks for an event (link_resume_accepting).
void pause_accepting(Id* listener) {
  static bool said = false;
  if (!said) {
    said = true;
    rlimit files{};
    getrlimit(RLIMIT_NOFILE, &files);
    SV_WARN("rdma_cm: out of file descriptors (RLIMIT_NOFILE %llu): a connect from another process of this "
            "host waits until one is free (each process this one has rdma_cm connections with on this host "
            "takes one)",
            static_cast<unsigned long long>(files.rlim_cur));
  }
  watch_remove(listener->sock_watch);
  if (std::find(paused_listeners().begin(), paused_listeners().end(), listener) == paused_listeners().end())
    paused_listeners().push_back(listener);
}

CmLink* link_new(int fd) {
  auto* link = new CmLink;
  link->watch.kind = WatchKind::kLink;
  link->watch.fd = fd;
  link->watch.object = link;
  return link;
}

void forget_name(CmLink* link) {
  if (link->name.empty()) return;
  auto it = links_by_name().find(link->name);
  if (it != links_by_name().end() && it->second == link) links_by_name().erase(it);
  link->name.clear();
}

bool flush(CmLink* link);

// Closes a link nobody uses any more. What its last ids said (GONE, DREQ)
// goes first, for a moment at most: nobody may pump this side's channels
// again, and a reader in this same process cannot drain it while we hold
// the CM lock. Whatever is left, the peer learns from the EOF (its ids on
// the link see their peers gone).
void maybe_free(CmLink* link) {
  if (!link->ids.empty() || link->listener || link->pins) return;
  for (int waited_ms = 0; !flush(link) && waited_ms < kLastWordsMs; waited_ms += 10) {
    pollfd out{link->watch.fd, POLLOUT, 0};
    poll(&out, 1, 10);
  }
  forget_name(link);
  std::erase(accepted_links(), link);
  link->watch.detach_all();
  close(link->watch.fd);
  delete link;
  link_resume_accepting();  // (an fd is free)
}

// Sends what waits in the outbox; true when it is empty.
bool flush(CmLink* link) {
  while (!link->outbox.empty()) {
    ssize_t n = send(link->watch.fd, &link->outbox.front(), sizeof(WireMessage), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;
    // A broken link: its reader sees EOF and reports the peers gone.
    link->outbox.pop_front();
  }
  return true;
}

void send_on(CmLink* link, const WireMessage& msg) {
  link->outbox.push_back(msg);
  if (flush(link)) return;
  if (!(link->watch.events & EPOLLOUT)) link->watch.set_events(EPOLLIN | EPOLLOUT);
}

// Reads one message; 1 on a message, 0 when nothing is there, -1 at EOF.
int receive(int fd, WireMessage* msg) {
  ssize_t n = recv(fd, msg, sizeof *msg, MSG_DONTWAIT);
  if (n < 0) return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
  if (n == 0) return -1;
  if (static_cast<size_t>(n) != sizeof *msg || msg->magic != WireMessage::kMagic) return 2;  // ignored
  return 1;
}

// A request the link's listener cannot take (gone, or not listening): the
// answer a CM gives for a port nobody listens on.
void refuse(CmLink* link, const WireMessage& req) {
  WireMessage answer;
  answer.type = req.type == MessageType::kSidrReq ? MessageType::kSidrRep : MessageType::kRej;
  answer.reason = req.type == MessageType::kSidrReq ? 2 /* IB_SIDR_UNSUPPORTED */ : kRejInvalidServiceId;
  answer.receiver_ref = req.sender_ref;
  send_on(link, answer);
}

// Whether `id` sent its REQ over the link and nobody has answered yet.
bool unanswered(const Id* id) { return id->state == IdState::kConnectSent && id->peer_ref == 0; }

// An unanswered REQ whose listener went: it goes to whoever listens on the
// name now, over a new link (a listener closed and opened again, as
// perftest's server does between its phases), or is rejected as a REQ to a
// port nobody listens on is.
void send_again(Id* id) {
  link_leave(id);
  if (link_connect(id) != 0 || link_send(id, id->waiting_req) != 0) reject_unanswered(id);
}

// The listener at the other end is gone: no new connects over the link.
void on_listener_gone(CmLink* link) {
  forget_name(link);
  PrivateVector<Id*> waiting;
  for (auto& [ref, id] : link->ids)
    if (unanswered(id)) waiting.push_back(id);
  for (Id* id : waiting) send_again(id);
}

// The peer process closed its end (exited, or was killed): every id still
// on the link learns its peer is gone.
void on_link_broken(CmLink* link) {
  forget_name(link);
  link->outbox.clear();
  link->listener = nullptr;
  PrivateVector<Id*> ids;
  for (auto& [ref, id] : link->ids) ids.push_back(id);
  for (Id* id : ids) {  // each leaves the link
    if (unanswered(id)) send_again(id);
    else on_peer_gone(id);
  }
  link->watch.detach_all();  // nothing more to read
}

void on_message(CmLink* link, const WireMessage& msg) {
  if (msg.receiver_ref == 0 && msg.type == MessageType::kGone) {
    if (msg.sender_ref == 0) return on_listener_gone(link);
    // An id destroyed before it heard from its peer: found by its own ref.
    for (auto& [ref, id] : link->ids)
      if (id->peer_ref == msg.sender_ref) return on_peer_gone(id);
    return;
  }
  if (msg.receiver_ref == 0) {
    if (msg.type != MessageType::kReq && msg.type != MessageType::kSidrReq) return;
    Id* listener = link->listener;
    if (!listener || listener->state != IdState::kListening) return refuse(link, msg);
    on_request(listener, link, msg);
    return;
  }
  auto it = link->ids.find(msg.receiver_ref);
  if (it == link->ids.end()) return;  // an id that left (destroyed, or done)
  Id* id = it->second;
  if (id->peer_ref == 0) id->peer_ref = msg.sender_ref;  // the REP names the passive id
  if (msg.type == MessageType::kGone) on_peer_gone(id);
  else handle(id, msg);
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

}  // namespace

void link_join(Id* id, CmLink* link, uint32_t peer_ref) {
  id->link = link;
  id->link_ref = next_ref();
  id->peer_ref = peer_ref;
  link->ids.emplace(id->link_ref, id);
  link->watch.attach(channel_of(id->pub.channel));
}

int link_connect(Id* id) {
  if (id->link) return 0;
  for (const std::string& name : listener_names(id->pub.ps, &id->pub.route.addr.dst_addr)) {
    CmLink* link = nullptr;
    if (auto it = links_by_name().find(name); it != links_by_name().end()) {
      link = it->second;
    } else {
      int fd = connect_name(name);
      if (fd < 0) {
        if (errno == ECONNREFUSED || errno == ENOENT) continue;
        return -1;
      }
      link = link_new(fd);
      link->name = name;
      links_by_name().emplace(name, link);
    }
    link_join(id, link, 0);
    return 0;
  }
  errno = ECONNREFUSED;
  return -1;
}

void link_accept(Id* listener) {
  for (;;) {
    int fd = accept4(listener->sock, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) pause_accepting(listener);
      return;
    }
    // Anyone can connect to an abstract name: only our own processes are
    // links to take (another user's would carry forged requests).
    if (!sv::is_trusted_uid(sv::peer_uid(fd))) {
      close(fd);
      continue;
    }
    CmLink* link = link_new(fd);
    link->listener = listener;
    accepted_links().push_back(link);
    link->watch.attach(channel_of(listener->pub.channel));
  }
}

void link_resume_accepting() {
  if (paused_listeners().empty()) return;
  for (Id* listener : PrivateVector<Id*>(std::move(paused_listeners()))) {
    if (listener->state != IdState::kListening || listener->sock_watch || listener->sock < 0) continue;
    listener->sock_watch = watch_add(channel_of(listener->pub.channel), WatchKind::kListener, listener->sock, listener);
  }
  paused_listeners().clear();
}

void link_listener_gone(Id* listener) {
  std::erase(paused_listeners(), listener);
  for (CmLink* link : PrivateVector<CmLink*>(accepted_links())) {
    if (link->listener != listener) continue;
    WireMessage gone;  // from nobody to nobody: the listener itself
    gone.type = MessageType::kGone;
    send_on(link, gone);
    link->listener = nullptr;
    link->watch.detach(channel_of(listener->pub.channel));
    maybe_free(link);
  }
}

int link_send(Id* id, const WireMessage& msg) {
  if (!id->link) {
    errno = ENOTCONN;
    return -1;
  }
  WireMessage out = msg;
  out.sender_ref = id->link_ref;
  out.receiver_ref = id->peer_ref;
  send_on(id->link, out);
  return 0;
}

void link_leave(Id* id) {
  CmLink* link = id->link;
  if (!link) return;
  link->ids.erase(id->link_ref);
  id->link = nullptr;
  link->watch.detach(channel_of(id->pub.channel));
  maybe_free(link);
}

void link_close(Id* id) {
  if (!id->link) return;
  // The peer learns the id is gone, as it read EOF on a socket of its own
  // (an id that sent no REQ yet has no peer: the message finds nobody).
  WireMessage gone;
  gone.type = MessageType::kGone;
  link_send(id, gone);
  link_leave(id);
}

void link_migrate(Id* id, Channel* from, Channel* to) {
  if (id->link) {
    id->link->watch.detach(from);
    id->link->watch.attach(to);
  }
  for (CmLink* link : accepted_links()) {
    if (link->listener != id) continue;
    link->watch.detach(from);
    link->watch.attach(to);
  }
}

void on_link_readable(CmLink* link) {
  ++link->pins;
  if ((link->watch.events & EPOLLOUT) && flush(link)) link->watch.set_events(EPOLLIN);
  for (int budget = 256; budget > 0; --budget) {  // then the other channels' turn
    WireMessage msg;
    const int got = receive(link->watch.fd, &msg);
    if (got == 0) break;
    if (got < 0) {
      on_link_broken(link);
      break;
    }
    if (got == 1) on_message(link, msg);
  }
  --link->pins;
  maybe_free(link);
}

}  // namespace sv::rdmacm
