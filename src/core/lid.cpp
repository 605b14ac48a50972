#include "core/lid.h"

#include <cstring>

#include "util/log.h"

namespace sv {
namespace {

// The first IPv4 GID of a real interface (GID 0 on an ordinary host: the
// table lists loopback last), or nullptr.
const GidEntry* first_ipv4(std::span<const GidEntry> gids) {
  for (const GidEntry& e : gids)
    if (!e.loopback && gid_is_ipv4_mapped(e.gid)) return &e;
  return nullptr;
}

uint16_t low_bits(const ibv_gid& gid) { return static_cast<uint16_t>(gid.raw[14] << 8 | gid.raw[15]); }

}  // namespace

uint16_t host_lid(std::span<const GidEntry> gids) {
  const GidEntry* e = first_ipv4(gids);
  if (!e) return 1;
  const uint16_t lid = low_bits(e->gid);
  if (lid == 0 || lid > kMaxUnicastLid) {
    static bool told = false;
    if (!told) SV_WARN("InfiniBand mode: %s ends in no unicast LID; this host's LID is 1", gid_to_string(e->gid).c_str());
    told = true;
    return 1;
  }
  return lid;
}

bool gid_of_lid(uint16_t lid, std::span<const GidEntry> gids, ibv_gid* out) {
  if (lid == 0 || lid > kMaxUnicastLid) return false;
  if (lid == host_lid(gids) && !gids.empty()) {
    *out = gids.front().gid;  // this host: any of its GIDs is reached in shared memory
    return true;
  }
  const GidEntry* e = first_ipv4(gids);
  if (!e) return false;
  *out = e->gid;
  out->raw[14] = static_cast<uint8_t>(lid >> 8);
  out->raw[15] = static_cast<uint8_t>(lid);
  return true;
}

uint16_t lid_of_gid(const ibv_gid& gid, std::span<const GidEntry> gids, uint16_t own_lid) {
  for (const GidEntry& e : gids)
    if (gid_equal(e.gid, gid)) return own_lid;
  if (!gid_is_ipv4_mapped(gid)) return 0;
  const uint16_t lid = low_bits(gid);
  return lid <= kMaxUnicastLid ? lid : 0;
}

}  // namespace sv
