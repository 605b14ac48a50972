#include "icrc.h"

#include <isa-l/crc.h>

#include <cstring>

#include "roce_opcode.h"

namespace sv::net {
namespace {

constexpr size_t kIpv4MinHeader = 20, kIpv4MaxHeader = 60, kIpv6Header = 40, kUdpHeader = 8;
constexpr size_t kUdpChecksum = 6, kBthCongestion = 4;

// Copies the IP header to `out` with the variant fields set to ones and
// returns its length, or 0 if it is not a well-formed IPv4/IPv6 header.
size_t masked_ip_header(const uint8_t* ip, size_t len, uint8_t* out) {
  if (len < 1) return 0;
  switch (ip[0] >> 4) {
    case 4: {
      size_t ihl = size_t{ip[0] & 0x0Fu} * 4;
      if (ihl < kIpv4MinHeader || len < ihl) return 0;
      std::memcpy(out, ip, ihl);
      out[1] = 0xFF;                // TOS (DSCP, ECN)
      out[8] = 0xFF;                // TTL
      out[10] = out[11] = 0xFF;     // header checksum
      return ihl;
    }
    case 6:
      if (len < kIpv6Header) return 0;
      std::memcpy(out, ip, kIpv6Header);
      out[0] |= 0x0F;               // traffic class, high nibble
      out[1] = out[2] = out[3] = 0xFF;  // traffic class, low nibble; flow label
      out[7] = 0xFF;                // hop limit
      return kIpv6Header;
    default:
      return 0;
  }
}

// ISA-L leaves the upper halves of the vector registers dirty: its AVX-512
// CRC (crc32_gzip_refl_by16_10, chosen where the CPU has VPCLMULQDQ)
// returns without VZEROUPPER, which ISA-L leaves to its callers
// (intel/isa-l#24). Until something clears them, every legacy-SSE
// instruction of the thread pays a false dependency on them, and the
// application's own code runs after ours: an MPI rank's matrix multiply
// (gcc -O2, SSE2) took 40 ms after an exchange over softverbs where it
// took 10 ms before it (bench/mpi_hosts.py's matmul, 0.39x btl tcp's
// speed). VZEROUPPER is an AVX instruction: only where the CPU has AVX
// (ISA-L picks no wider code without it).
// (__builtin_cpu_init first: this runs among the library's constructors.)
const bool g_cpu_has_avx = (__builtin_cpu_init(), __builtin_cpu_supports("avx"));

inline void clear_upper_vector_halves() {
#if defined(__x86_64__)
  if (g_cpu_has_avx) __asm__ volatile("vzeroupper");
#endif
}

}  // namespace

uint32_t icrc(const uint8_t* ip_udp, size_t ip_udp_len, const uint8_t* bth, size_t len) {
  uint8_t masked[kIpv4MaxHeader + kUdpHeader + kBthBytes];
  const size_t ip_len = masked_ip_header(ip_udp, ip_udp_len, masked);
  if (ip_len == 0 || ip_udp_len != ip_len + kUdpHeader || len < kBthBytes) return 0;
  std::memcpy(masked + ip_len, ip_udp + ip_len, kUdpHeader);
  std::memcpy(masked + ip_len + kUdpHeader, bth, kBthBytes);
  masked[ip_len + kUdpChecksum] = masked[ip_len + kUdpChecksum + 1] = 0xFF;
  masked[ip_len + kUdpHeader + kBthCongestion] = 0xFF;

  // ISA-L's crc32_gzip_refl is zlib's crc32: the reflected CRC-32 with the
  // initial and final complement built in, exactly the ICRC once the eight
  // 0xff bytes of the absent LRH have gone in first. (PCLMUL: ~100 ns for a
  // 1 KiB packet, where zlib takes ~750 ns; the ICRC is computed twice per
  // packet, so this is a good share of a core at full speed.)
  // (The same for every packet: taken once, not a call of ISA-L's per packet.)
  static const uint32_t kAfterNoLrh = [] {
    static constexpr uint8_t kNoLrh[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    const uint32_t crc = crc32_gzip_refl(0, kNoLrh, sizeof kNoLrh);
    clear_upper_vector_halves();
    return crc;
  }();
  uint32_t crc = crc32_gzip_refl(kAfterNoLrh, masked, ip_len + kUdpHeader + kBthBytes);
  crc = crc32_gzip_refl(crc, bth + kBthBytes, len - kBthBytes);
  clear_upper_vector_halves();
  return crc;
}

uint32_t icrc(const uint8_t* ip_packet, size_t len) {
  if (len < 1) return 0;
  const size_t ip_len = (ip_packet[0] >> 4) == 4 ? size_t{ip_packet[0] & 0x0Fu} * 4 : kIpv6Header;
  const size_t ip_udp_len = ip_len + kUdpHeader;
  if (len < ip_udp_len) return 0;
  return icrc(ip_packet, ip_udp_len, ip_packet + ip_udp_len, len - ip_udp_len);
}

}  // namespace sv::net
