#include "core/device_attr.h"

#include <endian.h>

#include <cstdio>
#include <cstring>

#include "core/device_profile.h"
#include "core/link_watch.h"
#include "core/lid.h"
#include "core/limits.h"
#include "shm/layout.h"
#include "shm/registry.h"
#include "util/knobs.h"

namespace sv {

const char* firmware_version() { return "softverbs 0.1.0"; }

void fill_device_attr(ibv_device_attr* a) {
  const DeviceProfile& p = device_profile();
  std::memset(a, 0, sizeof *a);
  std::snprintf(a->fw_ver, sizeof a->fw_ver, "%s", p.fw_ver.c_str());
  a->node_guid = htobe64(shm::host_node_guid());
  a->sys_image_guid = a->node_guid;
  a->max_mr_size = p.max_mr_size;
  a->page_size_cap = 0xfffff000;  // 4 KiB pages and every larger power of two
  a->vendor_id = static_cast<uint32_t>(p.vendor_id);
  a->vendor_part_id = static_cast<uint32_t>(p.vendor_part_id);
  a->hw_ver = static_cast<uint32_t>(p.hw_ver);
  a->max_qp = static_cast<int>(p.max_qp);
  a->max_qp_wr = static_cast<int>(p.max_qp_wr);
  a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_N_NOTIFY_CQ | IBV_DEVICE_SYS_IMAGE_GUID |
                        IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_XRC |
                        IBV_DEVICE_RAW_IP_CSUM | IBV_DEVICE_MANAGED_FLOW_STEERING;
  a->device_cap_flags &= static_cast<unsigned>(p.device_cap_flags);  // (the profile's device's, of these)
  if (!p.max_mw) a->device_cap_flags &= ~(IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B);
  a->max_sge = static_cast<int>(p.max_sge);
  a->max_sge_rd = static_cast<int>(p.max_sge_rd);
  a->max_cq = static_cast<int>(p.max_cq);
  a->max_cqe = static_cast<int>(p.max_cqe);
  a->max_mr = static_cast<int>(p.max_mr);
  a->max_pd = static_cast<int>(p.max_pd);
  a->max_qp_rd_atom = static_cast<int>(p.max_qp_rd_atom);
  a->max_ee_rd_atom = 0;
  a->max_res_rd_atom = static_cast<int>(p.max_res_rd_atom);
  a->max_qp_init_rd_atom = static_cast<int>(p.max_qp_init_rd_atom);
  a->max_ee_init_rd_atom = 0;
  // Atomic with respect to every other RDMA atomic of the host (CPU atomics
  // on shared mappings, striped host-wide locks otherwise): target memory.
  a->atomic_cap = p.atomic_cap;
  a->max_ee = 0;
  a->max_rdd = 0;
  a->max_mw = static_cast<int>(p.max_mw);  // (windows share the MR table)
  a->max_raw_ipv6_qp = 0;
  a->max_raw_ethy_qp = limits::kMaxQp;  // IBV_QPT_RAW_PACKET (AF_PACKET on a host interface)
  a->max_mcast_grp = shm::kMaxMcastGroups;
  a->max_mcast_qp_attach = shm::kMaxMcastMembers;
  a->max_total_mcast_qp_attach = shm::kMaxMcastGroups * shm::kMaxMcastMembers;
  a->max_ah = static_cast<int>(p.max_ah);
  a->max_fmr = 0;
  a->max_map_per_fmr = 0;
  a->max_srq = static_cast<int>(p.max_srq);
  a->max_srq_wr = static_cast<int>(p.max_srq_wr);
  a->max_srq_sge = static_cast<int>(p.max_srq_sge);
  a->max_pkeys = limits::kMaxPkeys;
  a->local_ca_ack_delay = static_cast<uint8_t>(p.local_ca_ack_delay);
  a->phys_port_cnt = 1;
}

void fill_device_attr_ex(ibv_device_attr_ex* a) {
  std::memset(a, 0, sizeof *a);
  fill_device_attr(&a->orig_attr);
  // Completion timestamps: every CQE carries CLOCK_MONOTONIC nanoseconds.
  a->completion_timestamp_mask = ~0ull;
  a->hca_core_clock = limits::kCoreClockKhz;
  a->phys_port_cnt_ex = 1;
  // On-demand paging: nothing is ever pinned here, so any MR can follow the
  // application's mappings, the implicit one (the whole address space) too.
  // (Unless the profile's device has none: then none, as it reports.)
  if (device_profile().odp) {
    a->odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
    const uint32_t two_sided = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV;
    a->odp_caps.per_transport_caps.rc_odp_caps =
        two_sided | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC;
    a->odp_caps.per_transport_caps.uc_odp_caps = two_sided | IBV_ODP_SUPPORT_WRITE;
    a->odp_caps.per_transport_caps.ud_odp_caps = two_sided;
    // XRC: the same requester and responder code (XRC SRQs receive).
    a->xrc_odp_caps = two_sided | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC;
  }
  a->max_dm_size = limits::kMaxDmSize;
  // Raw Ethernet (raw.h): checksums, FCS, C-VLAN stripping, TSO and RSS, in software.
  a->raw_packet_caps = IBV_RAW_PACKET_CAP_CVLAN_STRIPPING | IBV_RAW_PACKET_CAP_SCATTER_FCS |
                       IBV_RAW_PACKET_CAP_IP_CSUM;
  a->tso_caps.max_tso = limits::kMaxTso;
  a->tso_caps.supported_qpts = 1u << IBV_QPT_RAW_PACKET;
  a->rss_caps.supported_qpts = 1u << IBV_QPT_RAW_PACKET;
  a->rss_caps.max_rwq_indirection_tables = limits::kMaxQp;
  a->rss_caps.max_rwq_indirection_table_size = 1u << limits::kMaxRwqIndTableLog;
  a->rss_caps.rx_hash_fields_mask = IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 | IBV_RX_HASH_SRC_IPV6 |
                                    IBV_RX_HASH_DST_IPV6 | IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_DST_PORT_TCP |
                                    IBV_RX_HASH_SRC_PORT_UDP | IBV_RX_HASH_DST_PORT_UDP;
  a->rss_caps.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
  a->max_wq_type_rq = limits::kMaxQp;
}

ibv_mtu ib_mtu_for_link(int link_mtu) {
  constexpr int kRxeMaxHeaders = 80;  // RXE_MAX_HDR_LENGTH
  const int room = link_mtu - kRxeMaxHeaders;
  if (room >= 4096) return IBV_MTU_4096;
  if (room >= 2048) return IBV_MTU_2048;
  if (room >= 1024) return IBV_MTU_1024;
  if (room >= 512) return IBV_MTU_512;
  return IBV_MTU_256;
}

void fill_port_attr(ibv_port_attr* p, std::span<const GidEntry> gids) {
  const size_t gid_count = gids.size();
  std::memset(p, 0, sizeof *p);
  p->state = gid_count > 0 && !link_watch::forced_down() ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
  p->max_mtu = IBV_MTU_4096;
  p->active_mtu = port_active_mtu(gids);
  p->gid_tbl_len = limits::kGidTableLen;
  p->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
  p->max_msg_sz = static_cast<uint32_t>(device_profile().max_msg_sz);
  p->pkey_tbl_len = limits::kMaxPkeys;
  p->max_vl_num = 1;
  // As rxe: the speed of the link under the port, which middleware sizes
  // its protocols by (UCX: the message size from which it registers memory
  // and waits for the peer's ACK, rather than copy and go on). Unknown (only
  // loopback, or a virtio NIC): the profile's, softverbs' own 4X EDR =
  // 100 Gb/s, about what a memory copy sustains.
  const DeviceProfile& profile = device_profile();
  const PortRate link = profile.rate_follows_link ? port_link_rate(gids) : PortRate{};
  p->active_width = link.width ? link.width : static_cast<uint8_t>(profile.active_width);
  p->active_speed = link.speed ? link.speed : static_cast<uint8_t>(profile.active_speed);
  p->phys_state = gid_count > 0 ? 5 : 3;  // LinkUp : Disabled
  p->link_layer = IBV_LINK_LAYER_ETHERNET;
  p->flags = IBV_QPF_GRH_REQUIRED;
  if (knobs().infiniband) {
    // An IB port: LID addressing (a GRH is optional), a subnet manager
    // (there is none; LIDs are the hosts' addresses: core/lid.h).
    p->link_layer = IBV_LINK_LAYER_INFINIBAND;
    p->flags = 0;
    p->port_cap_flags = IBV_PORT_CM_SUP;
    p->lid = host_lid(gids);
    p->sm_lid = p->lid;
    p->sm_sl = 0;
    p->lmc = 0;
  }
}

}  // namespace sv
