// Links: the intra-host rendezvous without an fd per id, or per peer.
//
// Two processes of one host whose rdma_cm ids connect talk in two ways:
//
// - A REQ travels over a rendezvous: a unix SOCK_SEQPACKET connection from
//   the connecting process to the listener's rendezvous socket
//   (cm_address.h), whose owner the kernel names (SO_PEERCRED), so a REQ
//   and its private data never reach a socket another user bound first. It
//   is made by the first id that connects there, shared by every later one,
//   and closed once every REQ on it is answered: it carries the REQ, the
//   answer (REP, REJ, SIDR REP), and a GONE from either id before that.
//   Its EOF says the listener (or its process) went before answering: the
//   REQ goes to whoever listens on the name now, or is rejected.
// - Everything after the answer (RTU, DREQ, REJ, GONE) goes between the two
//   processes' mailboxes: one unix SOCK_DGRAM socket per process, bound to
//   an abstract name with a random part, that hears from every peer. The
//   kernel attaches each sender's credentials (SO_PASSCRED): only our own
//   processes' messages are taken.
//
// Each message names its sender's and receiver's link references (process-
// unique numbers, WireMessage::sender_ref / receiver_ref), so one mailbox
// serves the ids of any number of peers: a process holds three descriptors
// for the CM's same-host traffic (mailbox, timer, liveness probe) plus one
// per listener it still waits for, whatever the number of connections or
// peers.
//
// What a link's EOF said before, a timer says now: a peer process that dies
// without a word (killed) is found within a second (its mailbox name is gone
// and its pid with it), and its ids' peers see what a vanished peer means
// in their state (RDMA_CM_EVENT_DISCONNECTED once established). An id
// destroyed while its peer lives says GONE at once.
#pragma once

#include "cm_state.h"

namespace sv::rdmacm {

// Puts `id` on a rendezvous to the listener that owns its destination, the
// most specific name first (made, or one already open): 0, or -1
// (ECONNREFUSED: nobody listens there). Out of descriptors, the REQ waits
// until one of ours closes (0; given up after a while: UNREACHABLE).
int link_connect(Id* id);
// Takes the listener's new rendezvous connections (its socket is readable).
void link_accept(Id* listener);
// Listeners that stopped taking connections for want of a file descriptor
// watch their sockets again (an fd may be free now).
void link_resume_accepting();
// The listener closes (destroyed): its rendezvous take no more requests.
void link_listener_gone(Id* listener);
// Sends `msg` from `id` to its peer; queued when the receiver is full.
int link_send(Id* id, const WireMessage& msg);
// The id stops hearing from its peer and leaves its link (stop_watching).
void link_leave(Id* id);
// At destroy: an id its peer still hears tells it it is gone, then leaves.
void link_close(Id* id);
// rdma_migrate_id: the id's (and a listener's rendezvous') watches follow it.
void link_migrate(Id* id, Channel* from, Channel* to);
// The child of a REQ that came over `via` joins it until it answers.
void link_join(Id* child, Rendezvous* via, uint32_t peer_ref);

// What the channels' pumps call (cm_channel.cpp).
void on_rendezvous_readable(Rendezvous* rv);
void on_local_mailbox_readable();
void on_link_timer();

}  // namespace sv::rdmacm
