// The common MAD header (IBTA vol 1, 13.4.2; Linux struct ib_mad_hdr): the
// first 24 bytes of every 256-byte management datagram, big-endian.
//
//   byte 0 base version | 1 management class | 2 class version | 3 method
//   bytes 4-5 status | 6-7 class specific | 8-15 transaction ID
//   bytes 16-17 attribute ID | 18-19 reserved | 20-23 attribute modifier
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace sv::ibcm {

inline constexpr size_t kMadSize = 256;
inline constexpr size_t kMadHeaderSize = 24;

inline constexpr uint8_t kMadBaseVersion = 1;
inline constexpr uint8_t kCmClass = 0x07;        // Communication Management
inline constexpr uint8_t kCmClassVersion = 2;    // IBTA 1.2 (Linux IB_CM_CLASS_VERSION)
inline constexpr uint8_t kMethodSend = 0x03;     // every CM message is a Send

// QP1 (the GSI) receives MADs; its well-known Q_Key.
inline constexpr uint32_t kGsiQpn = 1;
inline constexpr uint32_t kGsiQkey = 0x80010000;

struct MadHeader {
  uint8_t base_version = kMadBaseVersion;
  uint8_t mgmt_class = kCmClass;
  uint8_t class_version = kCmClassVersion;
  uint8_t method = kMethodSend;
  uint16_t status = 0;
  uint16_t class_specific = 0;
  uint64_t transaction_id = 0;
  uint16_t attribute_id = 0;
  uint32_t attribute_modifier = 0;

  bool operator==(const MadHeader&) const = default;
};

// Writes the header into the first 24 bytes of `mad` (reserved bytes 0).
void encode_mad_header(const MadHeader& h, std::span<uint8_t, kMadHeaderSize> mad);
// Reads the first 24 bytes; no validation (that depends on the class).
MadHeader decode_mad_header(std::span<const uint8_t, kMadHeaderSize> mad);

}  // namespace sv::ibcm
