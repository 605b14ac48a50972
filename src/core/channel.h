// Completion channels: the fd an application sleeps on until an armed CQ
// gets a completion. The fd is a doorbell (shm/doorbell.h); which CQs fired
// is read from their shared `event_pending` flags.
#pragma once

#include <infiniband/verbs.h>

#include <deque>
#include <mutex>
#include <vector>

#include "core/context.h"
#include "shm/doorbell.h"
#include "util/private_heap.h"

namespace sv {

struct Cq;

struct Channel : ibv_comp_channel, PrivateHeapObject {
  static Channel* from(ibv_comp_channel* c) { return static_cast<Channel*>(c); }
  Context* ctx = nullptr;
  shm::Doorbell bell;
  std::mutex mu;
  PrivateVector<Cq*> cqs;    // CQs that report here
  PrivateDeque<Cq*> ready;   // fired, not yet returned by get_cq_event
};

Channel* create_channel(Context* ctx);  // nullptr + errno
int destroy_channel(Channel* ch);       // EBUSY while CQs use it
void channel_attach(Channel* ch, Cq* cq);
void channel_detach(Channel* ch, Cq* cq);

// Blocks (unless the fd is O_NONBLOCK: then -1/EAGAIN) until a CQ fires.
int get_cq_event(Channel* ch, Cq** cq, void** cq_context);
void ack_cq_events(Cq* cq, unsigned n);

}  // namespace sv
