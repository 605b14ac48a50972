// Links: the intra-host rendezvous without an fd per id.
//
// Two processes of one host that connect rdma_cm ids share one link: a
// unix SOCK_SEQPACKET connection from the connecting process to the
// listener's rendezvous socket (cm_address.h), made by the first id that
// connects and reused by every later one to the same listener. Each
// message names its sender's and receiver's link references (process-
// unique numbers, WireMessage::sender_ref / receiver_ref), so a link
// carries the REQ/REP/RTU/REJ/DREQ of thousands of ids, as one QP1 carries
// a host's CM MADs. A REQ names no receiver: it is for the listener that
// accepted the link.
//
// The link doubles as the liveness signal the per-id sockets were: an id
// destroyed while its peer still listens sends GONE; a process that dies
// closes its links, and the survivor's ids on them read EOF. Either way the
// peer's id sees what a vanished peer means in its state
// (RDMA_CM_EVENT_DISCONNECTED once established).
#pragma once

#include "cm_state.h"

namespace sv::rdmacm {

// Puts `id` on a link to the listener that owns its destination, the most
// specific name first (made, or one already open): 0, or -1 (ECONNREFUSED:
// nobody listens there).
int link_connect(Id* id);
// Takes the listener's new links (its rendezvous socket is readable).
void link_accept(Id* listener);
// Listeners that stopped taking links for want of a file descriptor watch
// their sockets again (an fd may be free now).
void link_resume_accepting();
// The listener closes (destroyed): its links take no more requests.
void link_listener_gone(Id* listener);
// Sends `msg` from `id` to its peer; queued when the socket is full.
int link_send(Id* id, const WireMessage& msg);
// The id stops hearing from its peer and leaves its link (stop_watching).
void link_leave(Id* id);
// At destroy: an id its peer still hears tells it it is gone, then leaves.
void link_close(Id* id);
// rdma_migrate_id: the id's (and a listener's links') watches follow it.
void link_migrate(Id* id, Channel* from, Channel* to);
// The child of a REQ that came over `link` joins it.
void link_join(Id* child, CmLink* link, uint32_t peer_ref);

}  // namespace sv::rdmacm
