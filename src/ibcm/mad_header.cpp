#include "mad_header.h"

#include "bit_field.h"

namespace sv::ibcm {
namespace {

constexpr BitField kBaseVersion{0, 0, 8};
constexpr BitField kMgmtClass{1, 0, 8};
constexpr BitField kClassVersion{2, 0, 8};
constexpr BitField kMethod{3, 0, 8};
constexpr BitField kStatus{4, 0, 16};
constexpr BitField kClassSpecific{6, 0, 16};
constexpr BitField kTransactionId{8, 0, 64};
constexpr BitField kAttributeId{16, 0, 16};
constexpr BitField kReserved{18, 0, 16};
constexpr BitField kAttributeModifier{20, 0, 32};

}  // namespace

void encode_mad_header(const MadHeader& h, std::span<uint8_t, kMadHeaderSize> mad) {
  put_bits(mad, kBaseVersion, h.base_version);
  put_bits(mad, kMgmtClass, h.mgmt_class);
  put_bits(mad, kClassVersion, h.class_version);
  put_bits(mad, kMethod, h.method);
  put_bits(mad, kStatus, h.status);
  put_bits(mad, kClassSpecific, h.class_specific);
  put_bits(mad, kTransactionId, h.transaction_id);
  put_bits(mad, kAttributeId, h.attribute_id);
  put_bits(mad, kReserved, 0);
  put_bits(mad, kAttributeModifier, h.attribute_modifier);
}

MadHeader decode_mad_header(std::span<const uint8_t, kMadHeaderSize> mad) {
  MadHeader h;
  h.base_version = static_cast<uint8_t>(get_bits(mad, kBaseVersion));
  h.mgmt_class = static_cast<uint8_t>(get_bits(mad, kMgmtClass));
  h.class_version = static_cast<uint8_t>(get_bits(mad, kClassVersion));
  h.method = static_cast<uint8_t>(get_bits(mad, kMethod));
  h.status = static_cast<uint16_t>(get_bits(mad, kStatus));
  h.class_specific = static_cast<uint16_t>(get_bits(mad, kClassSpecific));
  h.transaction_id = get_bits(mad, kTransactionId);
  h.attribute_id = static_cast<uint16_t>(get_bits(mad, kAttributeId));
  h.attribute_modifier = static_cast<uint32_t>(get_bits(mad, kAttributeModifier));
  return h;
}

}  // namespace sv::ibcm
