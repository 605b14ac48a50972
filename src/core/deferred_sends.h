// Sends left for the end of a scope. A poster holds its QP's send queue
// lock (sq_mu) while the transport builds the packets; the system call
// that sends them then ran under that lock too, so the network thread,
// handing the same QP its ACKs (answer_from_network), waited for a
// sendmmsg to end, yielding the CPU in a loop (ib_write_bw -s 8 between
// two namespaces: 74k sched_yield a second in the application, 38k in its
// network thread). Inside a DeferSends scope a transport queues instead
// and names itself (defer_sends); the outermost scope's end, with the
// locks let go, sends what was queued. Another thread that takes the
// transport's lock meanwhile sends it with its own: nothing waits longer
// than the scope.
#pragma once

#include <utility>

namespace sv {

// Sends what a transport queued for the end of the scope (whatever another
// thread has not sent already).
using SendDeferred = void (*)(void* transport);

inline thread_local int t_defer_depth = 0;
inline thread_local SendDeferred t_deferred_send = nullptr;
inline thread_local void* t_deferred_transport = nullptr;

// Whether `transport` may leave its sends to the scope's end: in a scope,
// and no other transport's sends are waiting there (one is kept; another
// sends at once, as outside a scope).
inline bool defer_sends(SendDeferred send, void* transport) {
  if (t_defer_depth == 0) return false;
  if (t_deferred_transport && t_deferred_transport != transport) return false;
  t_deferred_send = send;
  t_deferred_transport = transport;
  return true;
}

class DeferSends {
 public:
  DeferSends() { ++t_defer_depth; }
  ~DeferSends() {
    if (--t_defer_depth != 0 || !t_deferred_transport) return;
    void* const transport = std::exchange(t_deferred_transport, nullptr);
    std::exchange(t_deferred_send, nullptr)(transport);
  }
  DeferSends(const DeferSends&) = delete;
  DeferSends& operator=(const DeferSends&) = delete;
};

}  // namespace sv
