// The IB CM messages (IBTA vol 1, chapter 12; Linux
// include/rdma/ibta_vol1_c12.h) as plain structs, and their encoding into
// and out of one 256-byte MAD (management class 0x07, class version 2,
// method Send) as it travels to QP1.
//
// Every field of the spec's tables is here, at its Byte[Bit] position
// (cm_messages.cpp), values in host order. Fields narrower than their C++
// type are truncated to their width on encode. Private data areas are
// carried whole, at the spec's size: a sender zero-pads what its user gave,
// and a receiver sees the whole area, as the Linux CM reports it.
// LAP and APR (alternate path migration) are not supported: they decode as
// DecodeError::kUnknownAttribute.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <variant>

#include "mad_header.h"

namespace sv::ibcm {

enum class CmAttribute : uint16_t {
  kReq = 0x0010,
  kMra = 0x0011,
  kRej = 0x0012,
  kRep = 0x0013,
  kRtu = 0x0014,
  kDreq = 0x0015,
  kDrep = 0x0016,
  kSidrReq = 0x0017,
  kSidrRep = 0x0018,
};

// Private data and information areas, in bytes (Linux enum ib_cm_data_size).
inline constexpr size_t kReqPrivateDataSize = 92;
inline constexpr size_t kMraPrivateDataSize = 222;
inline constexpr size_t kRejPrivateDataSize = 148;
inline constexpr size_t kRepPrivateDataSize = 196;
inline constexpr size_t kRtuPrivateDataSize = 224;
inline constexpr size_t kDreqPrivateDataSize = 220;
inline constexpr size_t kDrepPrivateDataSize = 224;
inline constexpr size_t kSidrReqPrivateDataSize = 216;
inline constexpr size_t kSidrRepPrivateDataSize = 136;
inline constexpr size_t kRejAriSize = 72;
inline constexpr size_t kSidrRepInfoSize = 72;

// REQ "Transport Service Type" (2 bits).
enum class TransportService : uint8_t { kRc = 0, kUc = 1, kRd = 2, kExtended = 3 };
// REQ "Extended Transport Type" (3 bits) when the service type is Extended.
inline constexpr uint8_t kExtendedTransportXrc = 1;

// MRA "Message MRAed" / REJ "Message REJected" (2 bits).
enum class MessageResponded : uint8_t { kReq = 0, kRep = 1, kOther = 2 };

// REJ reasons (IBTA table 109; Linux enum ib_cm_rej_reason), the ones the
// connection manager sends or interprets.
enum class RejReason : uint16_t {
  kNoQp = 1,
  kNoResources = 3,
  kTimeout = 4,
  kUnsupported = 5,
  kInvalidCommId = 6,
  kInvalidServiceId = 8,
  kInvalidTransportType = 9,
  kStaleConnection = 10,
  kInvalidGid = 12,
  kInvalidMtu = 26,
  kInsufficientRespResources = 27,
  kConsumerDefined = 28,
  kInvalidClassVersion = 31,
  kVendorOptionNotSupported = 35,
};

// SIDR REP status (8 bits; Linux enum ib_cm_sidr_status).
enum class SidrStatus : uint8_t {
  kSuccess = 0,
  kUnsupported = 1,  // no listener for the service ID
  kReject = 2,
  kNoQp = 3,
  kRedirect = 4,
  kUnsupportedVersion = 5,
};

using Gid = std::array<uint8_t, 16>;

// The path fields of a REQ, primary or alternate (IBTA table 106, bytes
// 52-95 and 96-139). Over RoCE the GIDs carry the IP addresses and the LIDs
// mean nothing: Linux cm_format_req sends the permissive LID 0xFFFF when the
// path's hop limit is above 1, else the path's LIDs (0 on RoCE).
struct CmPath {
  uint16_t local_port_lid = 0;
  uint16_t remote_port_lid = 0;
  Gid local_port_gid{};
  Gid remote_port_gid{};
  uint32_t flow_label = 0;         // 20 bits
  uint8_t packet_rate = 0;         // 6 bits, IBTA rate encoding
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 0;
  uint8_t sl = 0;                  // 4 bits
  uint8_t subnet_local = 0;        // 1 bit
  uint8_t local_ack_timeout = 0;   // 5 bits

  bool operator==(const CmPath&) const = default;
};

struct Req {
  uint32_t local_comm_id = 0;
  uint64_t service_id = 0;
  uint64_t local_ca_guid = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;                  // 24 bits
  uint8_t responder_resources = 0;
  uint32_t local_eecn = 0;                 // 24 bits
  uint8_t initiator_depth = 0;
  uint32_t remote_eecn = 0;                // 24 bits
  uint8_t remote_cm_response_timeout = 0;  // 5 bits
  TransportService transport_service = TransportService::kRc;
  uint8_t end_to_end_flow_control = 0;     // 1 bit
  uint32_t starting_psn = 0;               // 24 bits
  uint8_t local_cm_response_timeout = 0;   // 5 bits
  uint8_t retry_count = 0;                 // 3 bits
  uint16_t pkey = 0xffff;
  uint8_t path_mtu = 0;                    // 4 bits, IBV_MTU_* encoding
  uint8_t rdc_exists = 0;                  // 1 bit
  uint8_t rnr_retry_count = 0;             // 3 bits
  uint8_t max_cm_retries = 0;              // 4 bits
  uint8_t srq = 0;                         // 1 bit
  uint8_t extended_transport_type = 0;     // 3 bits
  CmPath primary;
  CmPath alternate;                        // all zero: no alternate path
  uint8_t sap_supported = 0;               // 1 bit
  std::array<uint8_t, kReqPrivateDataSize> private_data{};

  bool operator==(const Req&) const = default;
};

// Message Receipt Acknowledgement: "I got it, give me longer".
struct Mra {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  MessageResponded message_mraed = MessageResponded::kReq;
  uint8_t service_timeout = 0;  // 5 bits
  std::array<uint8_t, kMraPrivateDataSize> private_data{};

  bool operator==(const Mra&) const = default;
};

struct Rej {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  MessageResponded message_rejected = MessageResponded::kReq;
  uint8_t reject_info_length = 0;  // 7 bits, bytes of `ari` that count (<= 72)
  uint16_t reason = 0;             // RejReason, or any other value received
  std::array<uint8_t, kRejAriSize> ari{};
  std::array<uint8_t, kRejPrivateDataSize> private_data{};

  bool operator==(const Rej&) const = default;
};

struct Rep {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;              // 24 bits
  uint32_t local_eecn = 0;             // 24 bits
  uint32_t starting_psn = 0;           // 24 bits
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t target_ack_delay = 0;        // 5 bits
  uint8_t failover_accepted = 0;       // 2 bits
  uint8_t end_to_end_flow_control = 0; // 1 bit
  uint8_t rnr_retry_count = 0;         // 3 bits
  uint8_t srq = 0;                     // 1 bit
  uint64_t local_ca_guid = 0;
  std::array<uint8_t, kRepPrivateDataSize> private_data{};

  bool operator==(const Rep&) const = default;
};

struct Rtu {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  std::array<uint8_t, kRtuPrivateDataSize> private_data{};

  bool operator==(const Rtu&) const = default;
};

struct Dreq {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t remote_qpn_eecn = 0;  // 24 bits
  std::array<uint8_t, kDreqPrivateDataSize> private_data{};

  bool operator==(const Dreq&) const = default;
};

struct Drep {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  std::array<uint8_t, kDrepPrivateDataSize> private_data{};

  bool operator==(const Drep&) const = default;
};

// Service ID Resolution: UD QPs (rdma_cm's RDMA_PS_UDP / IPOIB).
struct SidrReq {
  uint32_t request_id = 0;
  uint16_t pkey = 0xffff;
  uint64_t service_id = 0;
  std::array<uint8_t, kSidrReqPrivateDataSize> private_data{};

  bool operator==(const SidrReq&) const = default;
};

struct SidrRep {
  uint32_t request_id = 0;
  uint8_t status = 0;                          // SidrStatus, or any value received
  uint8_t additional_information_length = 0;   // bytes of `additional_information` (<= 72)
  uint32_t qpn = 0;                            // 24 bits
  uint64_t service_id = 0;
  uint32_t qkey = 0;
  std::array<uint8_t, kSidrRepInfoSize> additional_information{};
  std::array<uint8_t, kSidrRepPrivateDataSize> private_data{};

  bool operator==(const SidrRep&) const = default;
};

using CmBody = std::variant<Req, Mra, Rej, Rep, Rtu, Dreq, Drep, SidrReq, SidrRep>;

// One CM MAD: the body says which attribute it is; the rest of the MAD
// header is fixed for the CM (class 0x07, version 2, method Send, status 0,
// attribute modifier 0).
struct CmMessage {
  uint64_t transaction_id = 0;
  CmBody body;

  bool operator==(const CmMessage&) const = default;
};

CmAttribute attribute_of(const CmBody& body);

// Writes the whole MAD: header, the message at its offsets, zero in every
// reserved bit.
void encode(const CmMessage& msg, std::span<uint8_t, kMadSize> mad);
std::array<uint8_t, kMadSize> encode(const CmMessage& msg);

enum class DecodeError : uint8_t {
  kNone = 0,
  kShortBuffer,        // fewer than 256 bytes
  kBadBaseVersion,     // not 1
  kBadClass,           // not 0x07 (Communication Management)
  kBadClassVersion,    // not 2
  kBadMethod,          // not Send
  kUnknownAttribute,   // not one of CmAttribute (LAP, APR, ClassPortInfo, ...)
  kBadLength,          // REJ reject info / SIDR REP additional info longer than 72
};

const char* to_string(DecodeError e);

// Decodes the first 256 bytes of `mad` (a longer buffer is accepted; the
// bytes after the MAD are not read). On error `out` is left unchanged.
DecodeError decode(std::span<const uint8_t> mad, CmMessage& out);

}  // namespace sv::ibcm
