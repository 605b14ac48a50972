// Asynchronous events (ibv_get_async_event). Any process may raise one for
// an object of ours (a peer draining our SRQ below its limit, a peer's
// delivery that overran our CQ, ...): it appends a record to the context's
// shared ring and rings the context's doorbell, the fd ctx->async_fd.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "core/context.h"
#include "shm/peers.h"

namespace sv {

// Raise an event on a context of `owner` (any process, including us).
bool raise_async(shm::PeerTable& peers, const shm::Peer& owner, uint32_t ctx_index, ibv_event_type type,
                 uint32_t kind, uint32_t id);
// Raise an event on one of our own contexts.
void raise_async_local(Context* ctx, ibv_event_type type, uint32_t kind, uint32_t id);

int get_async_event(Context* ctx, ibv_async_event* event);
void ack_async_event(ibv_async_event* event);

}  // namespace sv
