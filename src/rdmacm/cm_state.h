// The connection manager's process-wide state: event channels, ids, their
// events, and the fds each channel watches.
//
// Design (docs/ARCHITECTURE.md, "Connection manager"): the kernel's rdma_cm
// makes progress in the kernel; we make it in the caller's thread. A
// channel's public fd is an epoll fd that watches everything that can
// produce an event for its ids (listening and connected rendezvous sockets,
// listener mailboxes, and the process's id mailbox and retry timer while
// an id of the channel talks to another host) plus an
// eventfd that is readable while queued events wait. So poll()/select() on channel->fd works as with the kernel, and
// rdma_get_cm_event turns whatever is readable into events.
//
// One recursive mutex guards all of it: connection management is not a
// data path, and one lock keeps the state machine simple. Nobody sleeps
// while holding it, except on the condition variable that waits for acks.
#pragma once

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <array>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <vector>

#include "cm_group_membership.h"
#include "cm_id_state.h"
#include "cm_wire.h"
#include "util/private_heap.h"

namespace sv::rdmacm {

struct Id;
struct Device;
struct CmLink;
struct Rendezvous;

// An event handed to the user; `pub` first so the user's pointer is ours.
struct Event : PrivateHeapObject {
  rdma_cm_event pub{};
  Id* counted = nullptr;  // the id whose reported/acked counters this moves
  uint8_t private_data[kMaxPrivateData]{};
};

struct Channel : PrivateHeapObject {
  rdma_event_channel pub{};  // pub.fd: the epoll fd users poll
  int ready_fd = -1;         // eventfd, readable while `queue` is not empty
  PrivateDeque<Event*> queue;
  // Threads inside rdma_get_cm_event on it. A program may destroy the
  // channel while another thread waits there (rping and cmtime do, at
  // exit): the waiters are woken, the last one frees it, and all block for
  // good, as rdma-core's stay in read() on the closed fd.
  int waiters = 0;
  bool destroyed = false;
};

// What an fd in a channel's epoll set stands for.
enum class WatchKind {
  kReady, kListener, kListenMailbox, kListenerWait,
  kProcessMailbox, kRetryTimers,  // shared by ids of any channel (SharedWatch)
  kRendezvous, kLocalMailbox, kLinkTimer,  // (cm_link.h)
};

struct Watch {
  WatchKind kind;
  int fd;
  Id* id;  // the listener for Incoming
  Channel* channel;
  void* object = nullptr;  // a shared watch's: what it serves (a CmLink, ...)
};

// A descriptor that serves ids of any channel, so that a process needs no
// fd per id: its CM mailbox and retry timer (cm_network.cpp), its same-host
// mailbox and timer and a rendezvous to a listener (cm_link.cpp). It sits in the epoll set of each
// channel that has an id using it, for as long as that channel has one;
// whichever channel's pump finds it readable reads it and queues the
// events on their ids' own channels.
struct SharedWatch {
  WatchKind kind{};
  int fd = -1;
  void* object = nullptr;
  // Per channel: ids using it there, and the watch's key in that channel.
  PrivateMap<Channel*, std::pair<unsigned, uint64_t>> channels;

  uint32_t events = 0x001;  // EPOLLIN, and EPOLLOUT while a link's outbox waits

  void attach(Channel* ch);
  void detach(Channel* ch);
  // Changes what it waits for, in every channel.
  void set_events(uint32_t epoll_events);
  // Removes it from every channel (before its fd closes).
  void detach_all();
};

struct Multicast {
  sockaddr_storage addr{};
  ibv_gid mgid{};
  void* context = nullptr;
  bool attached = false;
  GroupMembership membership;  // the host's join on the id's link (cm_group_membership.h)
};

// An id whose peer is on another host: its messages travel as IB CM MADs
// to the peer's QP1 and come back through the process's mailbox, which
// local_comm_id's top 16 bits name (cm_network.cpp).
struct NetLink {
  bool active = false;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint64_t transaction_id = 0;
  uint64_t local_guid = 0;
  uint64_t service_id = 0;     // passive: the REQ's (echoed in a SIDR REP)
  in6_addr peer_ip{};          // where its MADs go (IPv4 as ::ffff:a.b.c.d)
  in6_addr local_ip{};         // and come from
  int listen_mailbox = -1;     // a listener's: its service's gsi name
  uint64_t listen_watch = 0;
  // The last MAD that waits for an answer (REQ, REP, DREQ, SIDR REQ): sent
  // again when its deadline in the process's retry timer comes, until
  // answered or out of retries.
  std::array<uint8_t, 256> pending{};
  bool awaiting = false;
  MessageType pending_type{};
  int retries_left = 0;
  int retry_ms = 0;
  uint64_t retry_at_ns = 0;    // that deadline (CLOCK_MONOTONIC), 0: none
  std::array<uint8_t, 256> last_rtu{};  // sent again to a repeated REP
  bool sent_rtu = false;
};

struct Id : PrivateHeapObject {
  rdma_cm_id pub{};  // first: rdma_cm_id* converts to Id*
  IdState state = IdState::kIdle;  // changed only through set_state (cm_id_state.h)
  bool sync = false;         // created without a channel: calls block
  Device* device = nullptr;  // bound device, or null (wildcard / unbound)
  int gid_index = 0;

  int sock = -1;             // a listener's rendezvous socket (or an explicit port's reservation)
  uint64_t sock_watch = 0;   // its key in the channel's epoll (0: none)
  bool ephemeral = false;    // the port was picked at bind, held by this process only (cm_address.cpp)
  // Its way to the peer's process on this host (cm_link.h): the rendezvous
  // until its REQ is answered, the peer's mailbox after; and the references
  // that name the two ids in their messages.
  Rendezvous* rendezvous = nullptr;
  CmLink* link = nullptr;
  uint32_t link_ref = 0;
  uint32_t peer_ref = 0;

  unsigned events_reported = 0;
  unsigned events_acked = 0;

  // Connection parameters (ours and the peer's, from REQ/REP).
  uint32_t psn = 0;
  uint32_t remote_qpn = 0;
  uint32_t remote_psn = 0;
  uint32_t remote_qkey = 0;
  ibv_gid remote_gid{};
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t retry_count = 7;
  uint8_t rnr_retry_count = 7;
  uint8_t path_mtu = IBV_MTU_1024;
  bool connected_info = false;  // remote_* are valid
  bool connect_error = false;
  ibv_ece local_ece{};
  ibv_ece remote_ece{};

  // Options.
  uint8_t tos = 0;
  bool tos_set = false;
  uint8_t ack_timeout = 18;
  bool reuseaddr = false;
  int afonly = -1;  // -1: not set (dual stack for IPv6 wildcards)
  uint32_t qkey = RDMA_UDP_QKEY;

  // rdma_create_ep helpers.
  PrivateVector<uint8_t> connect_data;           // ai_connect, prepended to private data
  ibv_qp_init_attr* listen_qp_attr = nullptr;  // QP to create in rdma_get_request

  PrivateList<Multicast> multicasts;
  NetLink net;

  // A REQ to a port of this host that is bound but not listening yet
  // (cm_listener_wait.cpp): tried again on a timer until the deadline.
  int listener_wait_fd = -1;
  uint64_t listener_wait_watch = 0;
  uint64_t listener_deadline_ns = 0;
  // The REQ: sent once a listener is there, and again if the listener its
  // link led to goes before it answers (cm_link.cpp).
  WireMessage waiting_req{};
};

inline Id* id_of(rdma_cm_id* id) { return reinterpret_cast<Id*>(id); }
inline Channel* channel_of(rdma_event_channel* ch) { return reinterpret_cast<Channel*>(ch); }

// The lock and the wake-up for rdma_destroy_id / rdma_migrate_id, which wait
// until every event they reported has been acked.
std::recursive_mutex& cm_mutex();
std::condition_variable_any& cm_acked();
using CmLock = std::unique_lock<std::recursive_mutex>;

// --- channels (cm_channel.cpp) ---
Channel* channel_create();  // nullptr with errno
void channel_destroy(Channel* ch);
// Queues an event for `id` on its channel (status, type; the caller fills
// the rest of ev->pub before or after, under the lock).
Event* queue_event(Id* id, rdma_cm_event_type type, int status);
uint64_t watch_add(Channel* ch, WatchKind kind, int fd, Id* id);
void watch_remove(uint64_t& key);
// The same, and closes the fd (a socket nobody else owns).
void watch_remove_and_close(uint64_t& key);
// Drops a destroyed channel from every shared watch.
void shared_watches_forget(Channel* ch);
// Moves an id's watches and queued events to another channel.
void watch_move(Id* id, Channel* from, Channel* to);
// Drops the queued (not yet retrieved) events of `id`.
void drop_queued_events(Id* id);
// Blocks (or not) until an event is available on `ch`; the lock is dropped
// while sleeping. 0 and *out, or -1 with errno (EAGAIN when non-blocking).
int next_event(Channel* ch, Event** out);

// --- protocol (cm_protocol.cpp) ---
void on_listener_readable(Id* listener);
int send_message(Id* id, const WireMessage& msg);
// What an id does with a message from its peer, and a listener with a new
// request (link: the one it came over, or null for a MAD from the network).
void handle(Id* id, const WireMessage& msg);
Id* on_request(Id* listener, Rendezvous* via, const WireMessage& msg);
// The peer vanished (its process died, or it destroyed its id).
void on_peer_gone(Id* id);

// --- the network (cm_network.cpp) ---
void on_listen_mailbox_readable(Id* listener);
// The process's own mailbox (every id's MADs) and its retry timer.
void on_process_mailbox_readable();
void on_retry_timers();

// --- connecting to a listener of this host (cm_connect.cpp, cm_link.h) ---
// A REQ (or SIDR REQ) nobody on this host will answer: the event the kernel
// gives for it (REJECTED, invalid service ID; UNREACHABLE for SIDR).
void reject_unanswered(Id* id);
// No listener of ours took the REQ in id->waiting_req (link_connect failed,
// errno says why): another user's through the host service, ours later
// (wait_for_listener), or nobody's (reject_unanswered).
void connect_refused(Id* id);

// --- a REQ waiting for its listener (cm_listener_wait.cpp) ---
// Whether some id of this host holds a listener name `id`'s REQ could
// reach (bound, perhaps not listening yet).
bool listener_port_held(const Id* id);
// Keeps trying to reach the listener; 0, or -1 (errno) if it cannot wait.
int wait_for_listener(Id* id, const WireMessage& req);
void on_listener_wait_timer(Id* id);
void stop_waiting_for_listener(Id* id);

// --- ids (cm_id.cpp) ---
Id* id_create(Channel* ch, void* context, rdma_port_space ps, ibv_qp_type qp_type, bool sync);
// For calls on a synchronous id: waits for the event the call produced,
// as rdma-core's ucma_complete does (0, or -1 with errno from its status).
int complete_sync(Id* id);

}  // namespace sv::rdmacm
