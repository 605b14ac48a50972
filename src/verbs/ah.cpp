// Address handles, and building them from a received work completion.
#include <cstdio>
#include <cstring>

#include "core/gid_table.h"
#include "core/grh.h"
#include "core/pd.h"
#include "verbs/abi.h"

using namespace sv;

SV_EXPORT_1_1(ibv_create_ah) ibv_ah* sv_ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  if (!pd || !attr) return abi::fail_null<ibv_ah>(EINVAL);
  return abi::guarded<ibv_ah*>(nullptr, [&]() -> ibv_ah* { return create_ah(Pd::from(pd), *attr); });
}

SV_EXPORT_1_1(ibv_destroy_ah) int sv_ibv_destroy_ah(ibv_ah* ah) { return destroy_ah(Ah::from(ah)); }

// As rdma-core: the sender's address comes from the GRH (for RoCEv2 the
// IPv4 or IPv6 header the device put in the first 40 bytes of the buffer),
// and the source GID index is where our own address (the packet's
// destination) sits in the GID table.
SV_EXPORT int ibv_init_ah_from_wc(ibv_context* context, uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                                  ibv_ah_attr* ah_attr) {
  std::memset(ah_attr, 0, sizeof *ah_attr);
  ah_attr->dlid = wc->slid;
  ah_attr->sl = wc->sl;
  ah_attr->src_path_bits = wc->dlid_path_bits;
  ah_attr->port_num = port_num;
  if (!(wc->wc_flags & IBV_WC_GRH)) return 0;
  ah_attr->is_global = 1;
  ParsedGrh p;
  if (!parse_grh(reinterpret_cast<const uint8_t*>(grh), &p)) return -1;
  if (p.dgid.raw[0] == 0xff || (gid_is_ipv4_mapped(p.dgid) && (p.dgid.raw[12] & 0xf0) == 0xe0)) {
    errno = EINVAL;  // a multicast destination is not in the GID table
    return -1;
  }
  int idx = Context::from(context)->find_gid(p.dgid);
  if (idx < 0) {
    errno = ENOENT;
    return -1;
  }
  ah_attr->grh.dgid = p.sgid;
  ah_attr->grh.sgid_index = static_cast<uint8_t>(idx);
  ah_attr->grh.flow_label = p.flow_label;
  ah_attr->grh.hop_limit = p.hop_limit;
  ah_attr->grh.traffic_class = p.traffic_class;
  return 0;
}

SV_EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  ibv_ah_attr attr;
  if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr)) return nullptr;
  return sv_ibv_create_ah(pd, &attr);
}

// The MAC of a destination on this host is the MAC of the interface that
// holds its address; others are not resolved (EHOSTUNREACH): the RoCEv2
// transport sends through kernel UDP sockets, which resolve the next hop
// themselves, so nothing of ours needs a remote MAC.
SV_EXPORT int ibv_resolve_eth_l2_from_gid(ibv_context* context, ibv_ah_attr* attr, uint8_t eth_mac[6],
                                          uint16_t* vid) {
  Context* ctx = Context::from(context);
  GidEntry sgid;
  if (!ctx->gid_at(attr->grh.sgid_index, &sgid)) return -EINVAL;
  int idx = ctx->find_gid(attr->grh.dgid);
  GidEntry dst;
  if (idx < 0 || !ctx->gid_at(idx, &dst)) return -EHOSTUNREACH;
  std::memset(eth_mac, 0, 6);
  std::string path = "/sys/class/net/" + dst.ifname + "/address";
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    unsigned m[6];
    if (std::fscanf(f, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) == 6)
      for (int i = 0; i < 6; ++i) eth_mac[i] = static_cast<uint8_t>(m[i]);
    std::fclose(f);
  }
  if (vid) *vid = 0xffff;  // no VLAN
  return 0;
}
