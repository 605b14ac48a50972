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
//   fork-without-fork-init
//                      fork() while memory is registered and
//                      ibv_fork_init() was never called (nor RDMAV_FORK_SAFE
//                      set): on a NIC and a kernel before 5.13, a page the
//                      parent writes after the fork is copied, and the
//                      device goes on reading and writing the old one.
//   buffer-reused      the memory a send work request sends from (SEND,
//                      RDMA WRITE; not inline) changed between
//                      ibv_post_send and the poll of its completion: a NIC
//                      sends whatever it reads, before or after the change.
//                      (Checksummed at the post, compared when ibv_poll_cq
//                      takes the completion that frees its slot.)
//   single-thread-cq   a CQ created with IBV_CREATE_CQ_ATTR_SINGLE_THREADED
//                      polled by two threads at once: a provider that takes
//                      the hint (mlx5) polls it without a lock.
#pragma once

#include <atomic>
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

// With the checks on, each CQ carries this bit in its `attention` word
// (shm::CqShared), so that ibv_poll_cq takes its path with checks
// (poll_cq_checked) at no cost to polls without them.
inline constexpr uint32_t kAttentionChecks = 2;

// Registered memory regions, counted while the checks are on (core/mr.cpp).
extern std::atomic<int64_t> g_live_mrs;
// ibv_fork_init() was called (set by the verbs layer).
extern std::atomic<bool> g_fork_init;

}  // namespace sv::check
