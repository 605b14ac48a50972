// Flow steering rules (ibv_create_flow) and the counters they can feed.
#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

#include "core/qp.h"
#include "core/raw.h"

namespace sv {
namespace {

std::atomic<uint64_t> g_flow_order{0};

// (frame & mask) == (value & mask), byte by byte.
bool masked_equal(const void* frame, const void* value, const void* mask, size_t n) {
  auto* f = static_cast<const uint8_t*>(frame);
  auto* v = static_cast<const uint8_t*>(value);
  auto* m = static_cast<const uint8_t*>(mask);
  for (size_t i = 0; i < n; ++i)
    if ((f[i] & m[i]) != (v[i] & m[i])) return false;
  return true;
}

bool match_eth(const ibv_flow_spec_eth& s, const packet::Parsed& p) {
  uint16_t type_be = htons(p.ether_type), tci_be = htons(p.vlan ? p.vlan_tci : 0);
  return masked_equal(p.dst_mac, s.val.dst_mac, s.mask.dst_mac, 6) &&
         masked_equal(p.src_mac, s.val.src_mac, s.mask.src_mac, 6) &&
         masked_equal(&type_be, &s.val.ether_type, &s.mask.ether_type, 2) &&
         masked_equal(&tci_be, &s.val.vlan_tag, &s.mask.vlan_tag, 2);
}

bool match_ipv4(const ibv_flow_ipv4_filter& val, const ibv_flow_ipv4_filter& mask, const packet::Parsed& p) {
  return p.ip_version == 4 && masked_equal(&p.src_ip4_be, &val.src_ip, &mask.src_ip, 4) &&
         masked_equal(&p.dst_ip4_be, &val.dst_ip, &mask.dst_ip, 4);
}

bool match_ipv4_ext(const ibv_flow_spec_ipv4_ext& s, const packet::Parsed& p) {
  if (!match_ipv4({s.val.src_ip, s.val.dst_ip}, {s.mask.src_ip, s.mask.dst_ip}, p)) return false;
  return ((p.ip_proto ^ s.val.proto) & s.mask.proto) == 0 && ((p.tos ^ s.val.tos) & s.mask.tos) == 0 &&
         ((p.ttl ^ s.val.ttl) & s.mask.ttl) == 0;
}

bool match_ipv6(const ibv_flow_spec_ipv6& s, const packet::Parsed& p) {
  if (p.ip_version != 6) return false;
  uint32_t label_be = htonl(p.flow_label);
  return masked_equal(p.src_ip6, s.val.src_ip, s.mask.src_ip, 16) &&
         masked_equal(p.dst_ip6, s.val.dst_ip, s.mask.dst_ip, 16) &&
         masked_equal(&label_be, &s.val.flow_label, &s.mask.flow_label, 4) &&
         ((p.ip_proto ^ s.val.next_hdr) & s.mask.next_hdr) == 0 &&
         ((p.tos ^ s.val.traffic_class) & s.mask.traffic_class) == 0 &&
         ((p.ttl ^ s.val.hop_limit) & s.mask.hop_limit) == 0;
}

bool match_l4(const ibv_flow_spec_tcp_udp& s, uint8_t proto, const packet::Parsed& p) {
  if (!p.l4 || p.ip_proto != proto) return false;
  uint16_t src_be = htons(p.src_port), dst_be = htons(p.dst_port);
  return masked_equal(&src_be, &s.val.src_port, &s.mask.src_port, 2) &&
         masked_equal(&dst_be, &s.val.dst_port, &s.mask.dst_port, 2);
}

// The size each spec type must say it has.
size_t spec_size(uint32_t type) {
  switch (type) {
    case IBV_FLOW_SPEC_ETH: return sizeof(ibv_flow_spec_eth);
    case IBV_FLOW_SPEC_IPV4: return sizeof(ibv_flow_spec_ipv4);
    case IBV_FLOW_SPEC_IPV4_EXT: return sizeof(ibv_flow_spec_ipv4_ext);
    case IBV_FLOW_SPEC_IPV6: return sizeof(ibv_flow_spec_ipv6);
    case IBV_FLOW_SPEC_TCP:
    case IBV_FLOW_SPEC_UDP: return sizeof(ibv_flow_spec_tcp_udp);
    case IBV_FLOW_SPEC_ACTION_DROP: return sizeof(ibv_flow_spec_action_drop);
    case IBV_FLOW_SPEC_ACTION_COUNT: return sizeof(ibv_flow_spec_counter_action);
    case IBV_FLOW_SPEC_ACTION_TAG: return sizeof(ibv_flow_spec_action_tag);
    default: return 0;
  }
}

}  // namespace

void Counters::count(uint64_t bytes) {
  for (const Point& p : points)
    values[p.index].fetch_add(p.desc == IBV_COUNTER_PACKETS ? 1 : bytes, std::memory_order_relaxed);
}

Counters* create_counters(Context* ctx, const ibv_counters_init_attr& attr) {
  if (attr.comp_mask) {
    errno = EINVAL;
    return nullptr;
  }
  auto* c = new Counters();
  c->context = ctx->ibv();
  return c;
}

int destroy_counters(Counters* c) {
  if (c->flows.load() != 0) return EBUSY;
  delete c;
  return 0;
}

int attach_counters_point_flow(Counters* c, const ibv_counter_attach_attr& attr, ibv_flow* flow) {
  if (attr.comp_mask) return EINVAL;
  // Flows count packets and bytes; the other descriptions are not counters of a flow.
  if (attr.counter_desc != IBV_COUNTER_PACKETS && attr.counter_desc != IBV_COUNTER_BYTES) return EOPNOTSUPP;
  if (flow) return EOPNOTSUPP;  // attach to an existing flow: only the static form is offered
  if (c->flows.load() != 0) return EBUSY;  // bound already: no more points (man page)
  if (attr.index >= 256) return EINVAL;
  c->points.push_back({attr.counter_desc, attr.index});
  if (c->values.size() <= attr.index) {
    PrivateVector<std::atomic<uint64_t>> grown(attr.index + 1);
    for (size_t i = 0; i < c->values.size(); ++i) grown[i].store(c->values[i].load());
    c->values.swap(grown);
  }
  return 0;
}

int read_counters(Counters* c, uint64_t* values, uint32_t n, uint32_t flags) {
  if (flags & ~static_cast<uint32_t>(IBV_READ_COUNTERS_ATTR_PREFER_CACHED)) return EINVAL;
  for (uint32_t i = 0; i < n; ++i) values[i] = i < c->values.size() ? c->values[i].load(std::memory_order_relaxed) : 0;
  return 0;
}

bool flow_matches(const Flow& flow, const packet::Parsed& p) {
  for (const ibv_flow_spec& s : flow.specs) {
    bool ok = true;
    switch (s.hdr.type) {
      case IBV_FLOW_SPEC_ETH: ok = match_eth(s.eth, p); break;
      case IBV_FLOW_SPEC_IPV4: ok = match_ipv4(s.ipv4.val, s.ipv4.mask, p); break;
      case IBV_FLOW_SPEC_IPV4_EXT: ok = match_ipv4_ext(s.ipv4_ext, p); break;
      case IBV_FLOW_SPEC_IPV6: ok = match_ipv6(s.ipv6, p); break;
      case IBV_FLOW_SPEC_TCP: ok = match_l4(s.tcp_udp, IPPROTO_TCP, p); break;
      case IBV_FLOW_SPEC_UDP: ok = match_l4(s.tcp_udp, IPPROTO_UDP, p); break;
      default: break;
    }
    if (!ok) return false;
  }
  return true;
}

Flow* create_flow(Qp* qp, ibv_flow_attr* attr) {
  auto fail = [](int e) -> Flow* {
    errno = e;
    return nullptr;
  };
  if (!may_use_raw_packets()) return fail(EPERM);
  // Steering is for raw packet QPs (and UD sniffing, which this device does not offer).
  if (qp->type != IBV_QPT_RAW_PACKET) return fail(EOPNOTSUPP);
  if (attr->comp_mask) return fail(EINVAL);
  if (attr->flags & ~static_cast<uint32_t>(IBV_FLOW_ATTR_FLAGS_DONT_TRAP | IBV_FLOW_ATTR_FLAGS_EGRESS))
    return fail(EINVAL);
  if (attr->flags & IBV_FLOW_ATTR_FLAGS_EGRESS) return fail(EOPNOTSUPP);
  if (attr->port != 1) return fail(EINVAL);
  switch (attr->type) {
    case IBV_FLOW_ATTR_NORMAL:
    case IBV_FLOW_ATTR_ALL_DEFAULT:
    case IBV_FLOW_ATTR_MC_DEFAULT:
    case IBV_FLOW_ATTR_SNIFFER:
      break;
    default:
      return fail(EINVAL);
  }
  auto* flow = new Flow();
  flow->context = qp->qp_base.context;
  flow->qp = qp;
  flow->type = attr->type;
  flow->priority = attr->priority;
  flow->order = g_flow_order.fetch_add(1);
  flow->dont_trap = attr->flags & IBV_FLOW_ATTR_FLAGS_DONT_TRAP;
  // The specs follow the attribute, each saying its type and size.
  const uint8_t* at = reinterpret_cast<const uint8_t*>(attr + 1);
  for (unsigned i = 0; i < attr->num_of_specs; ++i) {
    ibv_flow_spec spec{};
    std::memcpy(&spec.hdr, at, sizeof spec.hdr);
    const uint32_t type = spec.hdr.type;
    const size_t size = spec_size(type);
    if (!size) {
      delete flow;
      // Known types this device does not steer on (tunnels, ESP, tags): unsupported.
      return fail(type >= IBV_FLOW_SPEC_ETH ? EOPNOTSUPP : EINVAL);
    }
    if (spec.hdr.size != size) {
      delete flow;
      return fail(EINVAL);
    }
    std::memcpy(&spec, at, size);
    at += size;
    if (type == IBV_FLOW_SPEC_ACTION_DROP) {
      flow->drop = true;
    } else if (type == IBV_FLOW_SPEC_ACTION_TAG) {
      if (spec.flow_tag.tag_id >= (1u << 24) || flow->tagged) {  // 24 bits, as NICs carry it
        delete flow;
        return fail(EINVAL);
      }
      flow->tagged = true;
      flow->tag = spec.flow_tag.tag_id;
    } else if (type == IBV_FLOW_SPEC_ACTION_COUNT) {
      if (!spec.flow_count.counters || flow->counters) {
        delete flow;
        return fail(EINVAL);
      }
      flow->counters = Counters::from(spec.flow_count.counters);
    } else {
      flow->specs.push_back(spec);
    }
  }
  if (flow->counters) flow->counters->flows.fetch_add(1);
  qp->flows.fetch_add(1);
  raw_add_flow(flow);
  return flow;
}

int destroy_flow(Flow* flow) {
  raw_remove_flow(flow);
  if (flow->counters) flow->counters->flows.fetch_sub(1);
  flow->qp->flows.fetch_sub(1);
  delete flow;
  return 0;
}

}  // namespace sv
