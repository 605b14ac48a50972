// The validation layer (SOFTVERBS_CHECK=warn|abort): API use that a real
// device tolerates until it breaks, reported where it happens, with the
// application's call site, as Vulkan's validation layers do. Off by
// default; every check sits on a path the verbs take anyway only when
// something is already unusual (a full send queue, creating or destroying
// an object), so being off costs the data path nothing.
//
// The checks (docs/testing.md lists them with the failures they explain):
//   sq-overrun         ibv_post_send finds the send queue full and none of
//                      the work requests in it signaled: their slots come
//                      back only with a later signaled completion, so the
//                      queue stays full for ever.
//   cq-too-small       a QP is created on a CQ with fewer entries than the
//                      QPs on it can complete at once: it can overrun
//                      (IBV_EVENT_CQ_ERR, the QPs to ERR).
//   unacked-events     ibv_destroy_cq or ibv_destroy_qp with events from
//                      ibv_get_cq_event / ibv_get_async_event never
//                      acknowledged: the call waits for them, for ever.
//   mr-in-use          ibv_dereg_mr of an MR that a posted, not yet
//                      completed work request names.
#pragma once

#include <cstdint>

namespace sv::check {

enum class Mode : uint8_t { kOff, kWarn, kAbort };

// SOFTVERBS_CHECK, read when the device list is first taken.
extern Mode g_mode;
void load();
inline bool on() { return __builtin_expect(g_mode != Mode::kOff, 0); }

// Reports misuse `check` (one of the names above): the message, then the
// application's call site (the first frame outside softverbs' libraries);
// aborts under SOFTVERBS_CHECK=abort.
void report(const char* check, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace sv::check
