// Which local process a RoCEv2 datagram from this host came from. Any local
// user can send UDP from this host's addresses, so the address says
// nothing; the source port does, once the host service holds it: each
// process hands the service the sockets it sends from (bound to ports of its
// own, with no sharing options, so no one else can bind them while they
// live), the service keeps a copy of each (the port stays held until the
// service lets go) and records, for that port, the registry slot it leased
// to the process. The table is a shared memory file only the service
// writes; processes map it read-only (docs/ARCHITECTURE.md, "Security").
// A datagram from a local address whose source port has no entry was sent
// by no process the service vouches for, and is dropped. Header-only.
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace sv {

struct PortAttestationTable {
  // [0]: IPv4 ports, [1]: IPv6 ports (a v6-only socket and a v4 one may
  // hold the same number). The slot, 0 for none.
  std::atomic<uint16_t> slot[2][65536];
};
static_assert(sizeof(PortAttestationTable) == 2 * 65536 * sizeof(uint16_t));

inline int attestation_family(const in6_addr& a) {
  const uint32_t* w = reinterpret_cast<const uint32_t*>(a.s6_addr);
  return w[0] == 0 && w[1] == 0 && w[2] == htonl(0xffff) ? 0 : 1;
}

// The slot the service vouches for as the sender from `src` port `port`; 0: none.
inline uint32_t attested_slot(const PortAttestationTable* t, const in6_addr& src, uint16_t port) {
  return t ? t->slot[attestation_family(src)][port].load(std::memory_order_acquire) : 0;
}

}  // namespace sv
