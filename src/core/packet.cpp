#include "core/packet.h"

#include <arpa/inet.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

namespace sv::packet {
namespace {

constexpr uint16_t kEthIpv4 = 0x0800, kEthIpv6 = 0x86dd, kEthVlan = 0x8100, kEthQinQ = 0x88a8;
constexpr uint8_t kTcp = 6, kUdp = 17;

uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
uint32_t get32(const uint8_t* p) { return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3]; }
void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}

// The TCP/UDP checksum over the pseudo-header and the segment at l4.
uint16_t l4_checksum(const Parsed& f, const uint8_t* frame, size_t l4_len) {
  uint32_t sum = 0;
  uint8_t pseudo[40];
  size_t n;
  if (f.ip_version == 4) {
    std::memcpy(pseudo, &f.src_ip4_be, 4);
    std::memcpy(pseudo + 4, &f.dst_ip4_be, 4);
    pseudo[8] = 0;
    pseudo[9] = f.ip_proto;
    put16(pseudo + 10, static_cast<uint16_t>(l4_len));
    n = 12;
  } else {
    std::memcpy(pseudo, f.src_ip6, 16);
    std::memcpy(pseudo + 16, f.dst_ip6, 16);
    put32(pseudo + 32, static_cast<uint32_t>(l4_len));
    pseudo[36] = pseudo[37] = pseudo[38] = 0;
    pseudo[39] = f.ip_proto;
    n = 40;
  }
  sum = csum_add(sum, pseudo, n);
  sum = csum_add(sum, frame + f.l4, l4_len);
  return csum_fold(sum);
}

size_t checksum_field(uint8_t proto) { return proto == kTcp ? 16 : 6; }

}  // namespace

uint32_t csum_add(uint32_t sum, const uint8_t* data, size_t len) {
  for (size_t i = 0; i + 1 < len; i += 2) sum += get16(data + i);
  if (len & 1) sum += uint32_t{data[len - 1]} << 8;
  return sum;
}

uint16_t csum_fold(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

Parsed parse(const uint8_t* frame, size_t len) {
  Parsed p;
  p.frame = frame;
  p.len = len;
  if (len < 14) return p;
  std::memcpy(p.dst_mac, frame, 6);
  std::memcpy(p.src_mac, frame + 6, 6);
  size_t at = 12;
  uint16_t type = get16(frame + at);
  if ((type == kEthVlan || type == kEthQinQ) && len >= at + 6) {
    p.vlan = true;
    p.vlan_tci = get16(frame + at + 2);
    at += 4;
    type = get16(frame + at);
  }
  p.ether_type = type;
  at += 2;
  if (type == kEthIpv4 && len >= at + 20) {
    const uint8_t* ip = frame + at;
    size_t ihl = size_t{ip[0] & 0xfu} * 4;
    if ((ip[0] >> 4) != 4 || ihl < 20 || len < at + ihl) return p;
    p.l3 = at;
    p.ip_version = 4;
    p.tos = ip[1];
    p.ttl = ip[8];
    p.ip_proto = ip[9];
    std::memcpy(&p.src_ip4_be, ip + 12, 4);
    std::memcpy(&p.dst_ip4_be, ip + 16, 4);
    bool fragment = (get16(ip + 6) & 0x1fff) != 0;
    if (!fragment) at += ihl;
    else return p;
  } else if (type == kEthIpv6 && len >= at + 40) {
    const uint8_t* ip = frame + at;
    if ((ip[0] >> 4) != 6) return p;
    p.l3 = at;
    p.ip_version = 6;
    p.tos = static_cast<uint8_t>((get16(ip) >> 4) & 0xff);
    p.flow_label = get32(ip) & 0xfffff;
    p.ip_proto = ip[6];
    p.ttl = ip[7];
    std::memcpy(p.src_ip6, ip + 8, 16);
    std::memcpy(p.dst_ip6, ip + 24, 16);
    at += 40;
  } else {
    return p;
  }
  if ((p.ip_proto == kTcp && len >= at + 20) || (p.ip_proto == kUdp && len >= at + 8)) {
    p.l4 = at;
    p.src_port = get16(frame + at);
    p.dst_port = get16(frame + at + 2);
  }
  return p;
}

void fill_checksums(uint8_t* frame, size_t len) {
  Parsed f = parse(frame, len);
  if (f.ip_version == 4) {
    uint8_t* ip = frame + f.l3;
    size_t ihl = size_t{ip[0] & 0xfu} * 4;
    ip[10] = ip[11] = 0;
    put16(ip + 10, csum_fold(csum_add(0, ip, ihl)));
  }
  if (!f.l4) return;
  size_t l4_len = len - f.l4;
  if (f.ip_version == 4) l4_len = std::min<size_t>(l4_len, get16(frame + f.l3 + 2) - (f.l4 - f.l3));
  if (f.ip_version == 6) l4_len = std::min<size_t>(l4_len, get16(frame + f.l3 + 4));
  uint8_t* field = frame + f.l4 + checksum_field(f.ip_proto);
  field[0] = field[1] = 0;
  uint16_t c = l4_checksum(f, frame, l4_len);
  if (f.ip_proto == kUdp && c == 0) c = 0xffff;  // RFC 768: 0 means "none"
  put16(field, c);
}

bool checksums_ok(const uint8_t* frame, size_t len) {
  Parsed f = parse(frame, len);
  if (!f.l4) return false;
  size_t l4_len = len - f.l4;
  if (f.ip_version == 4) {
    const uint8_t* ip = frame + f.l3;
    size_t ihl = size_t{ip[0] & 0xfu} * 4;
    if (csum_fold(csum_add(0, ip, ihl)) != 0) return false;
    l4_len = std::min<size_t>(l4_len, get16(ip + 2) - (f.l4 - f.l3));
  } else {
    l4_len = std::min<size_t>(l4_len, get16(frame + f.l3 + 4));
  }
  if (f.ip_proto == kUdp && get16(frame + f.l4 + 6) == 0) return f.ip_version == 4;  // no checksum (IPv4 only)
  // Over a segment that carries its checksum, the sum comes out as 0.
  return l4_checksum(f, frame, l4_len) == 0;
}

std::vector<std::vector<uint8_t>> segment_tcp(const uint8_t* hdr, size_t hdr_len, const uint8_t* payload,
                                              size_t payload_len, uint16_t mss) {
  std::vector<std::vector<uint8_t>> out;
  Parsed h = parse(hdr, hdr_len);
  if (!h.l4 || h.ip_proto != kTcp || mss == 0) return out;
  const size_t tcp_len = static_cast<size_t>(hdr[h.l4 + 12] >> 4) * 4;
  if (h.l4 + tcp_len != hdr_len) return out;  // the header must end where the payload starts
  const uint32_t seq0 = get32(hdr + h.l4 + 4);
  const uint16_t id0 = h.ip_version == 4 ? get16(hdr + h.l3 + 4) : 0;
  const uint8_t flags = hdr[h.l4 + 13];
  size_t done = 0;
  uint16_t n = 0;
  do {
    const size_t chunk = std::min<size_t>(mss, payload_len - done);
    const bool last = done + chunk == payload_len;
    std::vector<uint8_t> f(hdr, hdr + hdr_len);
    f.insert(f.end(), payload + done, payload + done + chunk);
    if (h.ip_version == 4) {
      put16(f.data() + h.l3 + 2, static_cast<uint16_t>(f.size() - h.l3));
      put16(f.data() + h.l3 + 4, static_cast<uint16_t>(id0 + n));
    } else {
      put16(f.data() + h.l3 + 4, static_cast<uint16_t>(f.size() - h.l3 - 40));
    }
    put32(f.data() + h.l4 + 4, static_cast<uint32_t>(seq0 + done));
    // FIN and PSH belong to the last segment only, CWR to the first.
    uint8_t fl = flags;
    if (!last) fl &= static_cast<uint8_t>(~0x09);
    if (n) fl &= static_cast<uint8_t>(~0x80);
    f[h.l4 + 13] = fl;
    fill_checksums(f.data(), f.size());
    out.push_back(std::move(f));
    done += chunk;
    ++n;
  } while (done < payload_len);
  return out;
}

uint32_t fcs(const uint8_t* frame, size_t len) {
  return static_cast<uint32_t>(crc32(0L, frame, static_cast<uInt>(len)));
}

uint32_t toeplitz(const uint8_t* key, size_t key_len, const uint8_t* data, size_t len) {
  // For every set bit of the input, XOR in the 32 key bits that start at it.
  uint32_t hash = 0;
  uint32_t window = 0;
  size_t next = 0;  // next key byte to shift in
  for (; next < 4; ++next) window = window << 8 | (next < key_len ? key[next] : 0);
  for (size_t i = 0; i < len; ++i) {
    const uint8_t k = next < key_len ? key[next] : 0;
    ++next;
    for (int b = 7; b >= 0; --b) {
      if (data[i] & (1u << b)) hash ^= window;
      window = window << 1 | ((k >> b) & 1u);
    }
  }
  return hash;
}

}  // namespace sv::packet
