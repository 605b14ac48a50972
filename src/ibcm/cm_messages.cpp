#include "cm_messages.h"

#include <algorithm>
#include <type_traits>

#include "bit_field.h"

namespace sv::ibcm {
namespace {

constexpr size_t kCmDataSize = kMadSize - kMadHeaderSize;  // 232

// A field at Byte[Bit] of the IBTA message table (offsets count from the
// end of the MAD header, as in ibta_vol1_c12.h).
constexpr BitField at(unsigned byte, unsigned bit, unsigned width) {
  return BitField{static_cast<uint16_t>(kMadHeaderSize + byte), static_cast<uint8_t>(bit),
                  static_cast<uint8_t>(width)};
}
constexpr size_t area(unsigned byte) { return kMadHeaderSize + byte; }

// Each message is described once, by a function that walks its fields in
// table order; the encoder and the decoder are two walkers over the same
// description, so they cannot disagree on a position.
class Writer {
 public:
  explicit Writer(std::span<uint8_t, kMadSize> mad) : mad_(mad) {}
  template <class T>
  void field(BitField f, const T& v) {
    if constexpr (std::is_enum_v<T>)
      put_bits(mad_, f, static_cast<uint64_t>(v));
    else
      put_bits(mad_, f, v);
  }
  template <size_t N>
  void bytes(size_t offset, const std::array<uint8_t, N>& a) {
    std::copy(a.begin(), a.end(), mad_.begin() + offset);
  }

 private:
  std::span<uint8_t, kMadSize> mad_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t, kMadSize> mad) : mad_(mad) {}
  template <class T>
  void field(BitField f, T& v) {
    v = static_cast<T>(get_bits(mad_, f));
  }
  template <size_t N>
  void bytes(size_t offset, std::array<uint8_t, N>& a) {
    std::copy_n(mad_.begin() + offset, N, a.begin());
  }

 private:
  std::span<const uint8_t, kMadSize> mad_;
};

// IBTA table 106, bytes 52-95 (primary) or 96-139 (alternate).
template <class Io, class P>
void walk_path(Io& io, unsigned base, P& p) {
  io.field(at(base + 0, 0, 16), p.local_port_lid);
  io.field(at(base + 2, 0, 16), p.remote_port_lid);
  io.bytes(area(base + 4), p.local_port_gid);
  io.bytes(area(base + 20), p.remote_port_gid);
  io.field(at(base + 36, 0, 20), p.flow_label);
  io.field(at(base + 39, 2, 6), p.packet_rate);
  io.field(at(base + 40, 0, 8), p.traffic_class);
  io.field(at(base + 41, 0, 8), p.hop_limit);
  io.field(at(base + 42, 0, 4), p.sl);
  io.field(at(base + 42, 4, 1), p.subnet_local);
  io.field(at(base + 43, 0, 5), p.local_ack_timeout);
}

// Table 106: REQ.
template <class Io, class M>
void walk(Io& io, M& m) requires std::is_same_v<std::remove_const_t<M>, Req> {
  static_assert(140 + kReqPrivateDataSize == kCmDataSize);
  io.field(at(0, 0, 32), m.local_comm_id);
  io.field(at(8, 0, 64), m.service_id);
  io.field(at(16, 0, 64), m.local_ca_guid);
  io.field(at(28, 0, 32), m.local_qkey);
  io.field(at(32, 0, 24), m.local_qpn);
  io.field(at(35, 0, 8), m.responder_resources);
  io.field(at(36, 0, 24), m.local_eecn);
  io.field(at(39, 0, 8), m.initiator_depth);
  io.field(at(40, 0, 24), m.remote_eecn);
  io.field(at(43, 0, 5), m.remote_cm_response_timeout);
  io.field(at(43, 5, 2), m.transport_service);
  io.field(at(43, 7, 1), m.end_to_end_flow_control);
  io.field(at(44, 0, 24), m.starting_psn);
  io.field(at(47, 0, 5), m.local_cm_response_timeout);
  io.field(at(47, 5, 3), m.retry_count);
  io.field(at(48, 0, 16), m.pkey);
  io.field(at(50, 0, 4), m.path_mtu);
  io.field(at(50, 4, 1), m.rdc_exists);
  io.field(at(50, 5, 3), m.rnr_retry_count);
  io.field(at(51, 0, 4), m.max_cm_retries);
  io.field(at(51, 4, 1), m.srq);
  io.field(at(51, 5, 3), m.extended_transport_type);
  walk_path(io, 52, m.primary);
  walk_path(io, 96, m.alternate);
  io.field(at(139, 5, 1), m.sap_supported);
  io.bytes(area(140), m.private_data);
}

// Table 107: MRA.
template <class Io, class M>
void walk(Io& io, M& m) requires std::is_same_v<std::remove_const_t<M>, Mra> {
  static_assert(10 + kMraPrivateDataSize == kCmDataSize);
  io.field(at(0, 0, 32), m.local_comm_id);
  io.field(at(4, 0, 32), m.remote_comm_id);
  io.field(at(8, 0, 2), m.message_mraed);
  io.field(at(9, 0, 5), m.service_timeout);
  io.bytes(area(10), m.private_data);
}

// Table 108: REJ.
template <class Io, class M>
void walk(Io& io, M& m) requires std::is_same_v<std::remove_const_t<M>, Rej> {
  static_assert(12 + kRejAriSize == 84 && 84 + kRejPrivateDataSize == kCmDataSize);
  io.field(at(0, 0, 32), m.local_comm_id);
  io.field(at(4, 0, 32), m.remote_comm_id);
  io.field(at(8, 0, 2), m.message_rejected);
  io.field(at(9, 0, 7), m.reject_info_length);
  io.field(at(10, 0, 16), m.reason);
  io.bytes(area(12), m.ari);
  io.bytes(area(84), m.private_data);
}

// Table 110: REP.
template <class Io, class M>
void walk(Io& io, M& m) requires std::is_same_v<std::remove_const_t<M>, Rep> {
  static_assert(36 + kRepPrivateDataSize == kCmDataSize);
  io.field(at(0, 0, 32), m.local_comm_id);
  io.field(at(4, 0, 32), m.remote_comm_id);
  io.field(at(8, 0, 32), m.local_qkey);
  io.field(at(12, 0, 24), m.local_qpn);
  io.field(at(16, 0, 24), m.local_eecn);
  io.field(at(20, 0, 24), m.starting_psn);
  io.field(at(24, 0, 8), m.responder_resources);
  io.field(at(25, 0, 8), m.initiator_depth);
  io.field(at(26, 0, 5), m.target_ack_delay);
  io.field(at(26, 5, 2), m.failover_accepted);
  io.field(at(26, 7, 1), m.end_to_end_flow_control);
  io.field(at(27, 0, 3), m.rnr_retry_count);
  io.field(at(27, 3, 1), m.srq);
  io.field(at(28, 0, 64), m.local_ca_guid);
  io.bytes(area(36), m.private_data);
}

// Table 111: RTU.
template <class Io, class M>
void walk(Io& io, M& m) requires std::is_same_v<std::remove_const_t<M>, Rtu> {
  static_assert(8 + kRtuPrivateDataSize == kCmDataSize);
  io.field(at(0, 0, 32), m.local_comm_id);
  io.field(at(4, 0, 32), m.remote_comm_id);
  io.bytes(area(8), m.private_data);
}

// Table 112: DREQ.
template <class Io, class M>
void walk(Io& io, M& m) requires std::is_same_v<std::remove_const_t<M>, Dreq> {
  static_assert(12 + kDreqPrivateDataSize == kCmDataSize);
  io.field(at(0, 0, 32), m.local_comm_id);
  io.field(at(4, 0, 32), m.remote_comm_id);
  io.field(at(8, 0, 24), m.remote_qpn_eecn);
  io.bytes(area(12), m.private_data);
}

// Table 113: DREP.
template <class Io, class M>
void walk(Io& io, M& m) requires std::is_same_v<std::remove_const_t<M>, Drep> {
  static_assert(8 + kDrepPrivateDataSize == kCmDataSize);
  io.field(at(0, 0, 32), m.local_comm_id);
  io.field(at(4, 0, 32), m.remote_comm_id);
  io.bytes(area(8), m.private_data);
}

// Table 119: SIDR_REQ.
template <class Io, class M>
void walk(Io& io, M& m) requires std::is_same_v<std::remove_const_t<M>, SidrReq> {
  static_assert(16 + kSidrReqPrivateDataSize == kCmDataSize);
  io.field(at(0, 0, 32), m.request_id);
  io.field(at(4, 0, 16), m.pkey);
  io.field(at(8, 0, 64), m.service_id);
  io.bytes(area(16), m.private_data);
}

// Table 120: SIDR_REP.
template <class Io, class M>
void walk(Io& io, M& m) requires std::is_same_v<std::remove_const_t<M>, SidrRep> {
  static_assert(24 + kSidrRepInfoSize == 96 && 96 + kSidrRepPrivateDataSize == kCmDataSize);
  io.field(at(0, 0, 32), m.request_id);
  io.field(at(4, 0, 8), m.status);
  io.field(at(5, 0, 8), m.additional_information_length);
  io.field(at(8, 0, 24), m.qpn);
  io.field(at(12, 0, 64), m.service_id);
  io.field(at(20, 0, 32), m.qkey);
  io.bytes(area(24), m.additional_information);
  io.bytes(area(96), m.private_data);
}

template <class T>
constexpr CmAttribute attribute_for() {
  if constexpr (std::is_same_v<T, Req>) return CmAttribute::kReq;
  else if constexpr (std::is_same_v<T, Mra>) return CmAttribute::kMra;
  else if constexpr (std::is_same_v<T, Rej>) return CmAttribute::kRej;
  else if constexpr (std::is_same_v<T, Rep>) return CmAttribute::kRep;
  else if constexpr (std::is_same_v<T, Rtu>) return CmAttribute::kRtu;
  else if constexpr (std::is_same_v<T, Dreq>) return CmAttribute::kDreq;
  else if constexpr (std::is_same_v<T, Drep>) return CmAttribute::kDrep;
  else if constexpr (std::is_same_v<T, SidrReq>) return CmAttribute::kSidrReq;
  else return CmAttribute::kSidrRep;
}

template <class T>
CmBody read_body(std::span<const uint8_t, kMadSize> mad) {
  T m;
  Reader r(mad);
  walk(r, m);
  return m;
}

}  // namespace

CmAttribute attribute_of(const CmBody& body) {
  return std::visit([](const auto& m) { return attribute_for<std::decay_t<decltype(m)>>(); }, body);
}

void encode(const CmMessage& msg, std::span<uint8_t, kMadSize> mad) {
  std::fill(mad.begin(), mad.end(), uint8_t{0});
  MadHeader h;
  h.transaction_id = msg.transaction_id;
  h.attribute_id = static_cast<uint16_t>(attribute_of(msg.body));
  encode_mad_header(h, mad.first<kMadHeaderSize>());
  Writer w(mad);
  std::visit([&w](const auto& m) { walk(w, m); }, msg.body);
}

std::array<uint8_t, kMadSize> encode(const CmMessage& msg) {
  std::array<uint8_t, kMadSize> mad;
  encode(msg, mad);
  return mad;
}

const char* to_string(DecodeError e) {
  switch (e) {
    case DecodeError::kNone: return "ok";
    case DecodeError::kShortBuffer: return "shorter than a MAD";
    case DecodeError::kBadBaseVersion: return "MAD base version is not 1";
    case DecodeError::kBadClass: return "management class is not CM";
    case DecodeError::kBadClassVersion: return "CM class version is not 2";
    case DecodeError::kBadMethod: return "method is not Send";
    case DecodeError::kUnknownAttribute: return "unknown or unsupported CM attribute";
    case DecodeError::kBadLength: return "information length beyond its area";
  }
  return "unknown error";
}

DecodeError decode(std::span<const uint8_t> bytes, CmMessage& out) {
  if (bytes.size() < kMadSize) return DecodeError::kShortBuffer;
  std::span<const uint8_t, kMadSize> mad = bytes.first<kMadSize>();
  MadHeader h = decode_mad_header(mad.first<kMadHeaderSize>());
  if (h.base_version != kMadBaseVersion) return DecodeError::kBadBaseVersion;
  if (h.mgmt_class != kCmClass) return DecodeError::kBadClass;
  if (h.class_version != kCmClassVersion) return DecodeError::kBadClassVersion;
  if (h.method != kMethodSend) return DecodeError::kBadMethod;

  CmBody body;
  switch (static_cast<CmAttribute>(h.attribute_id)) {
    case CmAttribute::kReq: body = read_body<Req>(mad); break;
    case CmAttribute::kMra: body = read_body<Mra>(mad); break;
    case CmAttribute::kRej: body = read_body<Rej>(mad); break;
    case CmAttribute::kRep: body = read_body<Rep>(mad); break;
    case CmAttribute::kRtu: body = read_body<Rtu>(mad); break;
    case CmAttribute::kDreq: body = read_body<Dreq>(mad); break;
    case CmAttribute::kDrep: body = read_body<Drep>(mad); break;
    case CmAttribute::kSidrReq: body = read_body<SidrReq>(mad); break;
    case CmAttribute::kSidrRep: body = read_body<SidrRep>(mad); break;
    default: return DecodeError::kUnknownAttribute;
  }
  if (const Rej* rej = std::get_if<Rej>(&body); rej && rej->reject_info_length > kRejAriSize)
    return DecodeError::kBadLength;
  if (const SidrRep* rep = std::get_if<SidrRep>(&body);
      rep && rep->additional_information_length > kSidrRepInfoSize)
    return DecodeError::kBadLength;

  out.transaction_id = h.transaction_id;
  out.body = std::move(body);
  return DecodeError::kNone;
}

}  // namespace sv::ibcm
