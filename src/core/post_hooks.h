// Whether ibv_post_send takes its template with hooks (core/qp.cpp): with
// the timeline (core/trace.h) or the validation layer (core/check.h) on,
// set once when they are read. Faults (core/faults.h) have their own flag,
// which can change while the process runs. One flag for the two, so that
// a post without any pays the same two loads as before.
#pragma once

namespace sv {

extern bool g_post_hooks;

}  // namespace sv
