// Helpers shared by the connection calls (cm_connect.cpp) and the message
// handlers (cm_protocol.cpp).
#pragma once

#include <cstdint>

#include "cm_state.h"

namespace sv::rdmacm {

// A message from `id` with its addresses, GID and QP type filled in.
WireMessage message_from(const Id* id, MessageType type);
// Copies private data into `msg` (the caller checked the limit).
void set_private_data(WireMessage& msg, const void* data, uint8_t len);
// A fresh 24-bit starting PSN.
uint32_t random_psn();
// The id has nothing more to hear from its peer: it leaves its link.
void stop_watching(Id* id);
// Fills the path record from the id's addresses and device.
void fill_route(Id* id);

}  // namespace sv::rdmacm
