// Big-endian bit fields addressed as the IBTA tables address them: a field
// starts at Byte[Bit], where bit 0 is the most significant bit of the byte,
// and runs for `width` bits towards the less significant ones, crossing
// byte boundaries as needed. Every MAD field in chapters 12 and 13 is one of
// these, so the codecs are tables of positions, not hand-made shifts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace sv::ibcm {

struct BitField {
  uint16_t byte;   // offset of the first byte, from the start of the buffer
  uint8_t bit;     // 0..7, 0 = most significant bit of that byte
  uint8_t width;   // 1..64

  constexpr size_t end_byte() const { return (byte * 8u + bit + width + 7u) / 8u; }
};

// The value of the field; the caller guarantees buf covers f.end_byte().
constexpr uint64_t get_bits(std::span<const uint8_t> buf, BitField f) {
  uint64_t v = 0;
  unsigned pos = f.byte * 8u + f.bit;
  for (unsigned i = 0; i < f.width; ++i, ++pos)
    v = (v << 1) | ((buf[pos / 8] >> (7 - pos % 8)) & 1u);
  return v;
}

// Stores the low f.width bits of v and leaves every other bit of buf as it
// was: a value too wide for its field is truncated, never spilled into a
// neighbour.
constexpr void put_bits(std::span<uint8_t> buf, BitField f, uint64_t v) {
  unsigned pos = f.byte * 8u + f.bit + f.width;
  for (unsigned i = 0; i < f.width; ++i, v >>= 1) {
    --pos;
    uint8_t mask = static_cast<uint8_t>(1u << (7 - pos % 8));
    buf[pos / 8] = static_cast<uint8_t>((v & 1u) ? (buf[pos / 8] | mask) : (buf[pos / 8] & ~mask));
  }
}

}  // namespace sv::ibcm
