// libFuzzer target: a MAD as it reaches QP1 from the network. The GSI
// (transport/roce_gsi.cpp) decodes it to find its mailbox (mailboxes_for:
// the CM message, a REQ's or SIDR REQ's service ID and rdma_cm header) and
// to answer what nobody owns; librdmacm decodes it again. None of that may
// read past the MAD, and a message decode() accepts must encode to a MAD
// that decodes to the same message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "ibcm/cm_messages.h"
#include "ibcm/cma_header.h"
#include "ibcm/gsi_mailbox.h"
#include "ibcm/mad_header.h"

namespace {

using namespace sv::ibcm;

void check(bool ok) {
  if (!ok) std::abort();
}

// The rdma_cm header and service ID, as a listener's name is found from them.
void cma(std::span<const uint8_t> private_data, uint64_t service_id) {
  auto service = parse_ip_service_id(service_id);
  auto header = decode_cma_header(private_data);
  if (!header) return;
  check(header->ip_version == 4 || header->ip_version == 6);
  sockaddr_storage src, dst;
  to_sockaddrs(*header, service ? service->port : 0, src, dst);
  check(address_text(reinterpret_cast<sockaddr*>(&dst)).size() <= 48);
  std::array<uint8_t, kCmaHeaderSize> again;
  encode_cma_header(*header, again);
  check(decode_cma_header(again) == header);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Exactly `size` bytes on the heap: a read past them is caught.
  const std::vector<uint8_t> bytes(data, data + size);
  const std::span<const uint8_t> mad(bytes);
  if (size >= kMadHeaderSize) (void)decode_mad_header(mad.first<kMadHeaderSize>());
  for (const std::string& name : mailboxes_for(mad)) check(!name.empty());
  uint64_t service_id = 0;  // any bytes as a service ID, beside any as a header
  for (size_t i = 0; i < 8 && i < size; ++i) service_id = service_id << 8 | bytes[i];
  cma(mad, service_id);

  CmMessage m;
  if (decode(mad, m) != DecodeError::kNone) return 0;
  check(size >= kMadSize);
  const auto encoded = encode(m);
  CmMessage again;
  check(decode(encoded, again) == DecodeError::kNone && again == m);
  if (const auto* req = std::get_if<Req>(&m.body)) cma(req->private_data, req->service_id);
  if (const auto* sidr = std::get_if<SidrReq>(&m.body)) cma(sidr->private_data, sidr->service_id);
  return 0;
}
