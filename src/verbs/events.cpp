// Asynchronous events.
#include "core/async_events.h"
#include "verbs/abi.h"

using namespace sv;

SV_EXPORT_1_1(ibv_get_async_event) int sv_ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  return get_async_event(Context::from(context), event);
}

SV_EXPORT_1_1(ibv_ack_async_event) void sv_ibv_ack_async_event(ibv_async_event* event) { ack_async_event(event); }
