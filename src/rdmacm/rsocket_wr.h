// rsockets, stream sockets: what a work request id says, so that a
// completion can be accounted for (rsocket_progress.cpp).
#pragma once

#include <cstdint>

#include "rsocket_state.h"

namespace sv::rdmacm::rs {

enum class WrKind : uint64_t {
  kRecv = 1,   // a receive WR (any message of the peer)
  kData = 2,   // stream bytes; value: bytes staged in the send buffer
  kCtrl = 3,   // control message
  kWrite = 4,  // riowrite or iomap announcement; value: bytes staged
};

constexpr uint64_t wr_id(WrKind kind, uint32_t staged) {
  return (static_cast<uint64_t>(kind) << 56) | staged;
}
constexpr WrKind wr_kind(uint64_t id) { return static_cast<WrKind>(id >> 56); }
constexpr uint32_t wr_staged(uint64_t id) { return static_cast<uint32_t>(id); }

// Posts one receive WR (no buffer: every message is a WRITE WITH IMM).
int post_one_receive(RSocket& rs);

}  // namespace sv::rdmacm::rs
