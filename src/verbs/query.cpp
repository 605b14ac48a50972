// Device, port, GID and P_Key queries.
#include <endian.h>

#include <algorithm>
#include <cstring>

#include "core/context.h"
#include "core/device_attr.h"
#include "core/limits.h"
#include "util/knobs.h"
#include "verbs/abi.h"

using namespace sv;

namespace sv::abi {

int query_port_op(ibv_context* context, uint8_t port_num, ibv_port_attr* attr, size_t len) {
  if (port_num != 1) return EINVAL;
  ibv_port_attr full;
  fill_port_attr(&full, Context::from(context)->gid_table());
  std::memset(attr, 0, len);
  std::memcpy(attr, &full, std::min(len, sizeof full));
  return 0;
}

int query_device_ex_op(ibv_context* context, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                       size_t attr_size) {
  if (input && input->comp_mask) return EINVAL;
  if (attr_size < sizeof(ibv_device_attr)) return EINVAL;
  ibv_device_attr_ex full;
  fill_device_attr_ex(&full);
  std::memset(attr, 0, attr_size);
  std::memcpy(attr, &full, std::min(attr_size, sizeof full));
  return 0;
}

}  // namespace sv::abi

SV_EXPORT_1_1(ibv_query_device) int sv_ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
  fill_device_attr(attr);
  return 0;
}

// The old-ABI port query: its struct is a prefix of ibv_port_attr (no
// port_cap_flags2).
SV_EXPORT_1_1(ibv_query_port) int sv_ibv_query_port(ibv_context* context, uint8_t port_num, _compat_ibv_port_attr* attr) {
  return abi::query_port_op(context, port_num, reinterpret_cast<ibv_port_attr*>(attr),
                            offsetof(ibv_port_attr, port_cap_flags2));
}

SV_EXPORT_1_1(ibv_query_gid) int sv_ibv_query_gid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid) {
  if (port_num != 1 || index < 0 || index >= limits::kGidTableLen) {
    errno = EINVAL;
    return -1;
  }
  GidEntry e;
  if (Context::from(context)->gid_at(index, &e))
    *gid = e.gid;
  else
    std::memset(gid, 0, sizeof *gid);  // an empty slot reads as the zero GID
  return 0;
}

SV_EXPORT int _ibv_query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index,
                                ibv_gid_entry* entry, uint32_t flags, size_t entry_size) {
  if (flags || port_num != 1 || entry_size < sizeof(ibv_gid_entry)) return EINVAL;
  if (gid_index >= static_cast<uint32_t>(limits::kGidTableLen)) return EINVAL;
  GidEntry e;
  if (!Context::from(context)->gid_at(static_cast<int>(gid_index), &e)) return ENODATA;
  std::memset(entry, 0, entry_size);
  entry->gid = e.gid;
  entry->gid_index = gid_index;
  entry->port_num = 1;
  entry->gid_type = knobs().infiniband ? IBV_GID_TYPE_IB : IBV_GID_TYPE_ROCE_V2;
  entry->ndev_ifindex = e.ifindex;
  return 0;
}

SV_EXPORT ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries,
                                       uint32_t flags, size_t entry_size) {
  if (flags || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
  Context* ctx = Context::from(context);
  int n = ctx->gid_count();
  if (static_cast<size_t>(n) > max_entries) return -EINVAL;
  ssize_t out = 0;
  for (int i = 0; i < n; ++i) {
    auto* e = reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<uint8_t*>(entries) + out * entry_size);
    if (_ibv_query_gid_ex(context, 1, i, e, 0, entry_size) == 0) ++out;
  }
  return out;
}

// PRIVATE_34, used by ibv_devinfo: 0 = IB/RoCEv1, 1 = RoCEv2.
SV_EXPORT int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index, uint32_t* type) {
  if (port_num != 1 || index >= static_cast<unsigned>(limits::kGidTableLen)) {
    errno = EINVAL;
    return -1;
  }
  *type = knobs().infiniband ? 0 : 1;
  return 0;
}

SV_EXPORT_1_1(ibv_query_pkey) int sv_ibv_query_pkey(ibv_context* context, uint8_t port_num, int index, __be16* pkey) {
  if (port_num != 1 || index < 0 || index >= static_cast<int>(limits::kMaxPkeys)) {
    errno = EINVAL;
    return -1;
  }
  *pkey = htobe16(limits::kDefaultPkey);
  return 0;
}

SV_EXPORT int ibv_get_pkey_index(ibv_context* context, uint8_t port_num, __be16 pkey) {
  if (port_num != 1 || be16toh(pkey) != limits::kDefaultPkey) {
    errno = EINVAL;
    return -1;
  }
  return 0;
}
