// Port events from the host's network state. The port of this device is the
// host's IP stack: its GIDs are the host's addresses (core/gid_table.h), and
// it is ACTIVE while there is at least one. A thread per process (started
// with the first context, asleep in recv() on a netlink socket) hears the
// kernel announce address and link changes and raises what a RoCE device
// raises then: IBV_EVENT_GID_CHANGE when the GID table changed, and
// IBV_EVENT_PORT_ERR / IBV_EVENT_PORT_ACTIVE when the port went down or up.
// When only an interface's MTU changed, the contexts re-read the table so
// the port's active MTU follows it (no event: rxe raises none either).
#pragma once

namespace sv {

struct Context;

namespace link_watch {

// Contexts that get the events (from Context::create / destroy).
void add(Context* ctx);
void remove(Context* ctx);

// The port taken down (or up again) whatever the host's addresses say, as
// a link that goes down and comes back: IBV_EVENT_PORT_ERR or
// IBV_EVENT_PORT_ACTIVE to every context, and the port's state follows
// (SOFTVERBS_FAULTS port=down rules, core/faults.h).
void force_down(bool down);
// Whether the port is held down so.
bool forced_down();

}  // namespace link_watch
}  // namespace sv
