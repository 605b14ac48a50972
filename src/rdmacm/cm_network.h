// The connection manager between hosts (cm_network.cpp): IB CM MADs to the
// peer's QP1 and back through this process's mailboxes (one for all its
// ids, whose comm IDs' top 16 bits name it, and one per listener).
#pragma once

#include "cm_device.h"
#include "cm_state.h"

namespace sv::rdmacm {

// Whether the id's destination is another host (no device here owns it).
bool is_remote(const Id* id);
// Makes the network transport run in this process (it then receives what
// other hosts send to this host's QP1). 0, or -1 with errno.
int ensure_network(Device* device);
// A listener that other hosts can reach also gets a mailbox for its
// service (nothing for loopback addresses). 0, or -1 with errno.
int net_listen(Id* listener);
// Starts the id's network link and sends its REQ or SIDR REQ.
int net_connect(Id* id, const WireMessage& req);
// Sends a message of an id with a network link as its MAD.
int net_send(Id* id, const WireMessage& msg);
// At destroy: a connected id sends a DREQ; it leaves the process's
// mailbox and timer (a listener's own mailbox closes).
void net_close(Id* id);
// rdma_migrate_id: the process's mailbox and timer, watched for the id by
// channel `from`, are watched by `to` instead.
void net_migrate(Id* id, Channel* from, Channel* to);

}  // namespace sv::rdmacm
