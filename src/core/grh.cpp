#include "core/grh.h"

#include <arpa/inet.h>
#include <netinet/ip.h>

#include <cerrno>
#include <cstring>

#include "core/gid_table.h"

namespace sv {
namespace {

uint16_t ipv4_checksum(const uint8_t* hdr) {
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += (hdr[i] << 8) | hdr[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

}  // namespace

void build_grh(uint8_t out[kGrhBytes], const ibv_gid& sgid, const ibv_gid& dgid, uint8_t traffic_class,
               uint8_t hop_limit, uint32_t flow_label, uint32_t payload_len) {
  std::memset(out, 0, kGrhBytes);
  if (gid_is_ipv4_mapped(sgid) && gid_is_ipv4_mapped(dgid)) {
    uint8_t* ip = out + 20;
    uint16_t total = static_cast<uint16_t>(20 + kRoceUdOverhead + payload_len);
    ip[0] = 0x45;
    ip[1] = traffic_class;
    ip[2] = total >> 8;
    ip[3] = total & 0xff;
    ip[6] = 0x40;  // don't fragment
    ip[8] = hop_limit;
    ip[9] = IPPROTO_UDP;
    std::memcpy(ip + 12, sgid.raw + 12, 4);
    std::memcpy(ip + 16, dgid.raw + 12, 4);
    uint16_t csum = ipv4_checksum(ip);
    ip[10] = csum >> 8;
    ip[11] = csum & 0xff;
    return;
  }
  uint32_t vtf = (6u << 28) | (uint32_t{traffic_class} << 20) | (flow_label & 0xfffff);
  uint32_t be = htonl(vtf);
  std::memcpy(out, &be, 4);
  uint16_t plen = htons(static_cast<uint16_t>(kRoceUdOverhead + payload_len));
  std::memcpy(out + 4, &plen, 2);
  out[6] = IPPROTO_UDP;
  out[7] = hop_limit;
  std::memcpy(out + 8, sgid.raw, 16);
  std::memcpy(out + 24, dgid.raw, 16);
}

bool parse_grh(const uint8_t in[kGrhBytes], ParsedGrh* out) {
  const uint8_t* ip = in + 20;
  bool v6 = (in[0] >> 4) == 6;
  // Same rule as rdma-core: a valid IPv4 header in the last 20 bytes wins.
  bool v4 = (ip[0] >> 4) == 4 && (!v6 || ((ip[0] & 0xf) == 5 && ipv4_checksum(ip) == 0));
  std::memset(out, 0, sizeof *out);
  if (v4) {
    out->sgid.raw[10] = out->sgid.raw[11] = 0xff;
    out->dgid.raw[10] = out->dgid.raw[11] = 0xff;
    std::memcpy(out->sgid.raw + 12, ip + 12, 4);
    std::memcpy(out->dgid.raw + 12, ip + 16, 4);
    out->traffic_class = ip[1];
    out->hop_limit = ip[8];
    return true;
  }
  if (v6) {
    uint32_t vtf;
    std::memcpy(&vtf, in, 4);
    vtf = ntohl(vtf);
    out->traffic_class = (vtf >> 20) & 0xff;
    out->flow_label = vtf & 0xfffff;
    out->hop_limit = in[7];
    std::memcpy(out->sgid.raw, in + 8, 16);
    std::memcpy(out->dgid.raw, in + 24, 16);
    return true;
  }
  errno = EPROTONOSUPPORT;
  return false;
}

}  // namespace sv
