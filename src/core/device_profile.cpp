#include "core/device_profile.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/device_attr.h"
#include "core/limits.h"
#include "shm/layout.h"
#include "util/knobs.h"
#include "util/log.h"
#include "util/small_file.h"
#include "util/text_fields.h"

namespace sv {
namespace {

// softverbs' own: what limits.h holds.
DeviceProfile softverbs_profile() {
  DeviceProfile p;
  p.fw_ver = firmware_version();
  p.device_cap_flags = UINT32_MAX;  // (fill_device_attr reports what softverbs does of these)
  p.max_mr_size = limits::kMaxMrSize;
  p.max_qp = limits::kMaxQp;
  p.max_qp_wr = limits::kMaxQpWr;
  p.max_sge = limits::kMaxSge;
  p.max_sge_rd = limits::kMaxSgeRd;
  p.max_cq = limits::kMaxCq;
  p.max_cqe = limits::kMaxCqe;
  p.max_mr = limits::kMaxMr;
  p.max_pd = limits::kMaxPd;
  p.max_mw = limits::kMaxMr;  // windows share the MR table
  p.max_ah = limits::kMaxAh;
  p.max_srq = limits::kMaxSrq;
  p.max_srq_wr = limits::kMaxSrqWr;
  p.max_srq_sge = limits::kMaxSrqSge;
  p.max_qp_rd_atom = limits::kMaxQpRdAtom;
  p.max_qp_init_rd_atom = limits::kMaxQpInitRdAtom;
  p.max_res_rd_atom = uint64_t{limits::kMaxQpRdAtom} * limits::kMaxQp;
  p.max_inline_data = limits::kMaxInline;
  p.max_msg_sz = limits::kMaxMsgSize;
  return p;
}

// The built-in profiles: what each device reports, from the public sources
// docs/profiles.md cites beside each table (kernel sources for rxe and siw;
// `ibv_devinfo -v` dumps posted in public issue threads for the ConnectX
// parts). Limits above softverbs' own are lowered to them afterwards
// (clamp_to_softverbs).
DeviceProfile make_builtin(std::string_view name) {
  DeviceProfile p = softverbs_profile();
  p.name = std::string(name);
  if (name == "softverbs") return p;
  if (name == "rxe") {
    // Linux soft-RoCE, drivers/infiniband/sw/rxe/rxe_param.h and rxe.c
    // (ddmatsu/linux@0029fb9f, Linux ~6.4-6.10; DEFAULT_MAX_VALUE 1 << 20).
    p.board_id = "";
    p.fw_ver = "";                        // (rxe sets none)
    p.vendor_id = 0xffffff;               // RXE_VENDOR_ID
    p.vendor_part_id = 0;
    p.hw_ver = 0;
    p.max_mr_size = UINT64_MAX;           // RXE_MAX_MR_SIZE
    p.max_qp = (1u << 20) - 16;           // RXE_MAX_QP
    p.max_qp_wr = 1u << 20;               // RXE_MAX_QP_WR
    p.max_sge = 32;                       // RXE_MAX_SGE
    p.max_sge_rd = 32;                    // RXE_MAX_SGE_RD
    p.max_cq = 1u << 20;                  // RXE_MAX_CQ
    p.max_cqe = (1u << 15) - 1;           // 1 << RXE_MAX_LOG_CQE, less one
    p.max_mr = (1u << 20) - 1;            // RXE_MAX_MR
    p.max_pd = 1u << 20;                  // RXE_MAX_PD
    p.max_mw = 4096;                      // RXE_MAX_MW
    p.max_ah = (1u << 15) - 1;            // RXE_MAX_AH
    p.max_srq = (1u << 20) - 0x20001;     // RXE_MAX_SRQ
    p.max_srq_wr = 1u << 20;              // RXE_MAX_SRQ_WR
    p.max_srq_sge = 27;                   // RXE_MAX_SRQ_SGE
    p.max_qp_rd_atom = 128;               // RXE_MAX_QP_RD_ATOM
    p.max_qp_init_rd_atom = 128;          // RXE_MAX_QP_INIT_RD_ATOM
    p.max_res_rd_atom = 0x3f000;          // RXE_MAX_RES_RD_ATOM
    p.local_ca_ack_delay = 15;            // RXE_LOCAL_CA_ACK_DELAY
    p.device_cap_flags = 0x01223c76;      // RXE_DEVICE_CAP_FLAGS (its 32 bits)
    p.atomic_cap = IBV_ATOMIC_HCA;
    p.odp = false;                        // (patches add it after this tree)
    p.max_inline_data = 32 * 16;          // RXE_MAX_INLINE_DATA: RXE_MAX_SGE * sizeof(struct ib_sge)
    p.max_msg_sz = 0x800000;              // RXE_PORT_MAX_MSG_SZ
    return p;
  }
  if (name == "siw") {
    // Linux soft-iWARP, drivers/infiniband/sw/siw/siw.h, siw_verbs.c
    // (siw_query_device, siw_query_port), include/uapi/rdma/siw-abi.h.
    p.board_id = "";
    p.fw_ver = "";                        // (siw sets none)
    p.vendor_id = 0x626d74;               // SIW_VENDOR_ID ("bmt")
    p.vendor_part_id = 1;                 // siw_device_register: dev_id++, from 1
    p.hw_ver = 0;
    p.max_mr_size = UINT64_MAX;
    p.max_qp = 1024 * 100;                // SIW_MAX_QP
    p.max_qp_wr = 1024 * 32;              // SIW_MAX_QP_WR
    p.max_sge = 6;                        // SIW_MAX_SGE
    p.max_sge_rd = 1;                     // SIW_MAX_SGE_RD
    p.max_cq = 1024 * 100;                // SIW_MAX_CQ
    p.max_cqe = 1024 * 32 * 100;          // SIW_MAX_CQE
    p.max_mr = 1024 * 1000;               // SIW_MAX_MR
    p.max_pd = 1024 * 100;                // SIW_MAX_PD
    p.max_mw = 0;                         // SIW_MAX_MW
    p.max_ah = 0;                         // (never set: no address handles on iWARP)
    p.max_srq = 1024 * 100;               // SIW_MAX_SRQ
    p.max_srq_wr = 1024 * 32 * 10;        // SIW_MAX_SRQ_WR
    p.max_srq_sge = 6;                    // SIW_MAX_SGE
    p.max_qp_rd_atom = 128;               // SIW_MAX_ORD_QP
    p.max_qp_init_rd_atom = 128;          // SIW_MAX_IRD_QP
    p.max_res_rd_atom = 128u * 1024 * 100;  // SIW_MAX_QP * SIW_MAX_IRD_QP
    p.local_ca_ack_delay = 0;
    p.device_cap_flags = IBV_DEVICE_MEM_MGT_EXTENSIONS;
    p.atomic_cap = IBV_ATOMIC_NONE;       // (siw_query_device sets none)
    p.odp = false;
    p.max_inline_data = 16 * (6 - 1);     // SIW_MAX_INLINE: sizeof(struct siw_sge) * (SIW_MAX_SGE - 1)
    p.max_msg_sz = 0xffffffff;            // siw_query_port: -1
    return p;
  }
  // What tells the ConnectX parts apart in their dumps.
  struct ConnectX {
    std::string_view name, board_id, fw_ver;
    uint64_t vendor_part_id, max_pd, max_res_rd_atom, device_cap_flags, active_speed;
  };
  static constexpr ConnectX kConnectX[] = {
      // name   board_id          fw_ver        part  max_pd    max_res_rd  cap flags   speed (EDR, HDR, NDR)
      {"cx5", "MT_0000000008", "16.23.1020", 4119, 16777216, 4194304, 0xed721c36, 32},
      {"cx6", "MT_0000000223", "20.29.1016", 4123, 16777216, 4194304, 0xe97e1c36, 64},
      {"cx7", "MT_0000000838", "28.39.2048", 4129, 8388608, 2097152, 0xe97e1c36, 128},
  };
  for (const ConnectX& cx : kConnectX) {
    if (name != cx.name) continue;
    // NVIDIA (Mellanox) ConnectX, mlx5. ConnectX-5's values are one dump's
    // (open-mpi/ompi#6184, firmware 16.23.1020) where it has them, the
    // rest of UCX issue #8139's ConnectX-5 dump; ConnectX-6 and -7 differ
    // in what their dumps show (the table above) and otherwise follow
    // ConnectX-5, as mlx5 derives them from the same capabilities
    // (docs/profiles.md says which are confirmed).
    p.board_id = std::string(cx.board_id);
    p.vendor_id = 0x02c9;  // Mellanox
    p.vendor_part_id = cx.vendor_part_id;
    p.fw_ver = std::string(cx.fw_ver);
    p.hw_ver = 0;
    p.max_mr_size = UINT64_MAX;
    p.max_qp = 262144;
    p.max_qp_wr = 32768;
    p.max_sge = 30;
    p.max_sge_rd = 30;
    p.max_cq = 16777216;
    p.max_cqe = 4194303;
    p.max_mr = 16777216;
    p.max_pd = cx.max_pd;
    p.max_mw = 16777216;
    p.max_ah = 2147483647;
    p.max_srq = 8388608;
    p.max_srq_wr = 32767;
    p.max_srq_sge = 31;
    p.max_qp_rd_atom = 16;
    p.max_qp_init_rd_atom = 16;
    p.max_res_rd_atom = cx.max_res_rd_atom;
    p.local_ca_ack_delay = 16;
    p.device_cap_flags = cx.device_cap_flags;
    p.atomic_cap = IBV_ATOMIC_HCA;
    p.odp = true;
    // RC inline data on mlx5: 988 bytes on a ConnectX-4 (ofiwg/libfabric
    // #3790), the same WQE arithmetic on later parts (not confirmed there).
    p.max_inline_data = 988;
    p.max_msg_sz = 0x40000000;  // 1 << log_max_msg
    p.active_width = 2;         // 4X
    p.active_speed = cx.active_speed;
    p.rate_follows_link = false;
    return p;
  }
  p.name.clear();
  return p;
}

struct Field {
  const char* key;
  uint64_t DeviceProfile::*value;
};
constexpr Field kFields[] = {
    {"vendor_id", &DeviceProfile::vendor_id},
    {"vendor_part_id", &DeviceProfile::vendor_part_id},
    {"hw_ver", &DeviceProfile::hw_ver},
    {"device_cap_flags", &DeviceProfile::device_cap_flags},
    {"max_mr_size", &DeviceProfile::max_mr_size},
    {"max_qp", &DeviceProfile::max_qp},
    {"max_qp_wr", &DeviceProfile::max_qp_wr},
    {"max_sge", &DeviceProfile::max_sge},
    {"max_sge_rd", &DeviceProfile::max_sge_rd},
    {"max_cq", &DeviceProfile::max_cq},
    {"max_cqe", &DeviceProfile::max_cqe},
    {"max_mr", &DeviceProfile::max_mr},
    {"max_pd", &DeviceProfile::max_pd},
    {"max_mw", &DeviceProfile::max_mw},
    {"max_ah", &DeviceProfile::max_ah},
    {"max_srq", &DeviceProfile::max_srq},
    {"max_srq_wr", &DeviceProfile::max_srq_wr},
    {"max_srq_sge", &DeviceProfile::max_srq_sge},
    {"max_qp_rd_atom", &DeviceProfile::max_qp_rd_atom},
    {"max_qp_init_rd_atom", &DeviceProfile::max_qp_init_rd_atom},
    {"max_res_rd_atom", &DeviceProfile::max_res_rd_atom},
    {"local_ca_ack_delay", &DeviceProfile::local_ca_ack_delay},
    {"max_inline_data", &DeviceProfile::max_inline_data},
    {"max_msg_sz", &DeviceProfile::max_msg_sz},
    {"active_width", &DeviceProfile::active_width},
    {"active_speed", &DeviceProfile::active_speed},
};

bool set_field(DeviceProfile* p, std::string_view key, std::string_view value, std::string* why) {
  if (key == "name") {
    p->name = std::string(value);
    return true;
  }
  if (key == "fw_ver") {
    p->fw_ver = std::string(value);
    return true;
  }
  if (key == "board_id") {
    p->board_id = std::string(value);
    return true;
  }
  if (key == "atomic_cap") {
    if (value == "none" || value == "ATOMIC_NONE") p->atomic_cap = IBV_ATOMIC_NONE;
    else if (value == "hca" || value == "ATOMIC_HCA") p->atomic_cap = IBV_ATOMIC_HCA;
    else if (value == "glob" || value == "ATOMIC_GLOB") p->atomic_cap = IBV_ATOMIC_GLOB;
    else return *why = "atomic_cap: none, hca or glob, not '" + std::string(value) + "'", false;
    return true;
  }
  if (key == "odp") {
    if (value == "1" || value == "yes") p->odp = true;
    else if (value == "0" || value == "no") p->odp = false;
    else return *why = "odp: 0 or 1, not '" + std::string(value) + "'", false;
    return true;
  }
  for (const Field& f : kFields)
    if (key == f.key) {
      if (!parse_u64(value, &(p->*f.value)))
        return *why = std::string(key) + ": not a number: '" + std::string(value) + "'", false;
      if (key == "active_width" || key == "active_speed") p->rate_follows_link = false;  // (said: kept)
      return true;
    }
  *why = "unknown key '" + std::string(key) + "'";
  return false;
}

const DeviceProfile* load() {
  const char* v = knobs().profile.c_str();
  auto* p = new DeviceProfile;  // (never freed: read until exit)
  if (!*v) {
    *p = softverbs_profile();
    return p;
  }
  if (const DeviceProfile* b = builtin_profile(v)) {
    *p = *b;
  } else {
    const std::optional<std::string> text = read_small_file(v);
    std::string why;
    if (!text) {
      SV_ERROR("SOFTVERBS_PROFILE=%s: no such profile (rxe, siw, cx5, cx6, cx7, softverbs) and no readable file (%s): "
               "no device is listed", v, strerror(errno));
      return nullptr;
    }
    if (!parse_profile(*text, p, &why)) {
      SV_ERROR("SOFTVERBS_PROFILE=%s: %s: no device is listed", v, why.c_str());
      return nullptr;
    }
  }
  clamp_to_softverbs(p);
  SV_INFO("device profile %s", p->name.c_str());
  return p;
}

}  // namespace

const DeviceProfile* builtin_profile(std::string_view name) {
  static const DeviceProfile kBuiltins[] = {make_builtin("softverbs"), make_builtin("rxe"), make_builtin("siw"),
                                            make_builtin("cx5"), make_builtin("cx6"), make_builtin("cx7")};
  for (const DeviceProfile& p : kBuiltins)
    if (!p.name.empty() && p.name == name) return &p;
  return nullptr;
}

bool parse_profile(std::string_view text, DeviceProfile* out, std::string* why) {
  DeviceProfile p = softverbs_profile();
  p.name = "file";
  int line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim_blanks(line);
    if (line.empty()) continue;
    const size_t eq = line.find_first_of("=:");
    if (eq == std::string_view::npos) return *why = "line " + std::to_string(line_no) + ": not 'key = value'", false;
    const std::string_view key = trim_blanks(line.substr(0, eq)), value = trim_blanks(line.substr(eq + 1));
    if (key == "base") {
      const DeviceProfile* b = builtin_profile(value);
      if (!b) return *why = "line " + std::to_string(line_no) + ": no built-in profile '" + std::string(value) + "'", false;
      p = *b;
      continue;
    }
    std::string field_why;
    if (!set_field(&p, key, value, &field_why)) return *why = "line " + std::to_string(line_no) + ": " + field_why, false;
  }
  *out = std::move(p);
  return true;
}

void clamp_to_softverbs(DeviceProfile* p) {
  const DeviceProfile own = softverbs_profile();
  for (const Field& f : kFields) {
    if (std::strncmp(f.key, "max_", 4) != 0) continue;
    p->*f.value = std::min(p->*f.value, own.*f.value);
  }
  // Nothing below one where one is the least a QP can have.
  p->max_qp_wr = std::max<uint64_t>(p->max_qp_wr, 1);
  p->max_sge = std::max<uint64_t>(p->max_sge, 1);
}

const DeviceProfile* device_profile_or_null() {
  static const DeviceProfile* const p = load();
  return p;
}

const DeviceProfile& device_profile() {
  static const DeviceProfile own = softverbs_profile();
  const DeviceProfile* p = device_profile_or_null();
  return p ? *p : own;
}

}  // namespace sv
