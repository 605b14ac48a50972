// A device profile (SOFTVERBS_PROFILE): the real device softverbs reports
// itself as, and holds programs to. A program tested "as a ConnectX-6" or
// "as rxe" sees that device's identity and limits in ibv_query_device and
// ibv_query_port, and the verbs refuse what that device would refuse: a QP
// with more SGEs or work requests than it allows, a longer message, an
// atomic where it has none, on-demand paging where it lacks it.
//
// SOFTVERBS_PROFILE names a built-in profile (softverbs, rxe, siw, cx5,
// cx6, cx7; docs/profiles.md cites where each value comes from) or a file
// of `key = value` lines (`base = NAME` first takes a built-in one; keys
// are the fields below, as ibv_devinfo -v names them). A limit larger than
// softverbs itself holds (limits.h) is lowered to it: a profile describes
// no more than the device, and no more than softverbs.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace sv {

struct DeviceProfile {
  std::string name = "softverbs";
  // Identity.
  std::string fw_ver;
  std::string board_id = "SOFTVERBS";
  uint64_t vendor_id = 0xffffff;  // no IEEE OUI: a software device, as rxe reports
  uint64_t vendor_part_id = 0;
  uint64_t hw_ver = 0;
  // What it says it can do (IBV_DEVICE_*): softverbs reports those of
  // these it does.
  uint64_t device_cap_flags = 0;
  // Limits (ibv_device_attr).
  uint64_t max_mr_size = 0;
  uint64_t max_qp = 0, max_qp_wr = 0, max_sge = 0, max_sge_rd = 0;
  uint64_t max_cq = 0, max_cqe = 0, max_mr = 0, max_pd = 0, max_mw = 0, max_ah = 0;
  uint64_t max_srq = 0, max_srq_wr = 0, max_srq_sge = 0;
  uint64_t max_qp_rd_atom = 0, max_qp_init_rd_atom = 0, max_res_rd_atom = 0;
  uint64_t local_ca_ack_delay = 0;
  ibv_atomic_cap atomic_cap = IBV_ATOMIC_HCA;
  bool odp = true;  // on-demand paging (IBV_ACCESS_ON_DEMAND)
  // What a QP may ask for as max_inline_data (create_qp fails above it).
  uint64_t max_inline_data = 0;
  // Port (ibv_port_attr).
  uint64_t max_msg_sz = 0;
  uint64_t active_width = 2;   // 4X
  uint64_t active_speed = 32;  // EDR
  // The port's width and speed are those rxe and siw report for the link
  // under the port (its netdev's speed: gid_table.h, port_link_rate); the
  // two above only when that link's speed is unknown. A ConnectX reports
  // its own, and so does a profile file that sets either.
  bool rate_follows_link = true;
};

// The profile in force: SOFTVERBS_PROFILE's, read once. Null when that
// names no built-in profile and no readable, well-formed file (the reason
// logged once): then no device is listed.
const DeviceProfile* device_profile_or_null();
// The profile in force; softverbs' own when SOFTVERBS_PROFILE is unusable
// (nothing is listed then, so nothing asks).
const DeviceProfile& device_profile();

// A built-in profile by name, or null.
const DeviceProfile* builtin_profile(std::string_view name);
// Reads a profile file's text over softverbs' own profile (or its `base`);
// false with the reason in *why for an unknown key, a bad value or base.
bool parse_profile(std::string_view text, DeviceProfile* out, std::string* why);
// Lowers every limit of `p` to what softverbs holds (limits.h).
void clamp_to_softverbs(DeviceProfile* p);

}  // namespace sv
