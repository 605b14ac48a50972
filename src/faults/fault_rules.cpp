#include "faults/fault_rules.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

#include "net/roce_opcode.h"
#include "util/clock.h"
#include "util/knobs.h"
#include "util/small_file.h"
#include "util/text_fields.h"

namespace sv::faults {

namespace {

constexpr const char* kCallNames[] = {"ibv_alloc_pd",  "ibv_reg_mr",    "ibv_create_cq", "ibv_create_qp", "ibv_modify_qp",
                                      "ibv_create_srq", "ibv_create_ah", "ibv_post_send", "ibv_post_recv",
                                      "rdma_create_id", "rdma_bind_addr", "rdma_resolve_addr", "rdma_resolve_route",
                                      "rdma_listen",    "rdma_connect",  "rdma_accept",   "rdma_create_qp"};
static_assert(std::size(kCallNames) == static_cast<size_t>(Call::kCount));

constexpr const char* kStatusNames[] = {
    "SUCCESS",       "LOC_LEN_ERR",      "LOC_QP_OP_ERR",   "LOC_EEC_OP_ERR",    "LOC_PROT_ERR",     "WR_FLUSH_ERR",
    "MW_BIND_ERR",   "BAD_RESP_ERR",     "LOC_ACCESS_ERR",  "REM_INV_REQ_ERR",   "REM_ACCESS_ERR",   "REM_OP_ERR",
    "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR", "REM_ABORT_ERR",  "INV_EECN_ERR",
    "INV_EEC_STATE_ERR", "FATAL_ERR",    "RESP_TIMEOUT_ERR", "GENERAL_ERR"};

struct Named {
  const char* name;
  int value;
};
constexpr Named kErrnos[] = {{"ENOMEM", ENOMEM},   {"EINVAL", EINVAL},     {"EAGAIN", EAGAIN},
                             {"EBUSY", EBUSY},     {"ENOSPC", ENOSPC},     {"EPERM", EPERM},
                             {"EACCES", EACCES},   {"EFAULT", EFAULT},     {"EIO", EIO},
                             {"ENODEV", ENODEV},   {"ETIMEDOUT", ETIMEDOUT}, {"EOPNOTSUPP", EOPNOTSUPP},
                             {"ENOBUFS", ENOBUFS}, {"EMFILE", EMFILE},
                             // (what rdma_cm's calls fail with)
                             {"EHOSTUNREACH", EHOSTUNREACH}, {"ENETUNREACH", ENETUNREACH},
                             {"ECONNREFUSED", ECONNREFUSED}, {"ECONNRESET", ECONNRESET},
                             {"EADDRINUSE", EADDRINUSE},     {"EADDRNOTAVAIL", EADDRNOTAVAIL}};
constexpr Named kOpcodes[] = {{"SEND", IBV_WR_SEND},
                              {"SEND_WITH_IMM", IBV_WR_SEND_WITH_IMM},
                              {"RDMA_WRITE", IBV_WR_RDMA_WRITE},
                              {"RDMA_WRITE_WITH_IMM", IBV_WR_RDMA_WRITE_WITH_IMM},
                              {"RDMA_READ", IBV_WR_RDMA_READ},
                              {"ATOMIC_CMP_AND_SWP", IBV_WR_ATOMIC_CMP_AND_SWP},
                              {"ATOMIC_FETCH_AND_ADD", IBV_WR_ATOMIC_FETCH_AND_ADD}};

template <size_t N>
bool lookup(const Named (&table)[N], std::string_view v, int* out) {
  for (const Named& n : table)
    if (v == n.name) return *out = n.value, true;
  uint64_t x;
  if (parse_u64(v, &x) && x < 1u << 16) return *out = static_cast<int>(x), true;
  return false;
}

constexpr const char* kPacketFaults[] = {"", "drop", "duplicate", "reorder", "delay", "corrupt"};

// A BTH opcode by its name in rdma-core and Linux (RC_ACKNOWLEDGE,
// UD_SEND_ONLY, with or without IB_OPCODE_), or its number.
bool bth_opcode(std::string_view v, int* out) {
  if (v.substr(0, 10) == "IB_OPCODE_") v.remove_prefix(10);
  for (int op = 0; op < 256; ++op)
    if (const net::OpcodeInfo* info = net::opcode_info(static_cast<uint8_t>(op)); info && v == info->name)
      return *out = op, true;
  uint64_t x;
  if (parse_u64(v, &x) && x < 256) return *out = static_cast<int>(x), true;
  return false;
}

bool parse_rule(std::string_view text, Rules* rules, std::string* why) {
  Rule r;
  std::string_view opcode_name;  // (resolved once the kind of rule is known)
  bool delay_given = false, for_given = false;
  int late_and_wc = 0;
  r.text = std::string(text);
  bool kind = false, seed_only = true;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = trim_blanks(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return *why = "'" + std::string(item) + "': not key=value", false;
    const std::string_view key = trim_blanks(item.substr(0, eq)), v = trim_blanks(item.substr(eq + 1));
    uint64_t x = 0;
    if (key == "seed") {  // (for every rule; alone, or beside one's keys)
      if (!parse_u64(v, &rules->seed)) return *why = "seed: not a number", false;
      seed_only = !kind && seed_only;
      continue;
    }
    seed_only = false;
    if (key == "call") {
      size_t i = 0;
      while (i < std::size(kCallNames) && v != kCallNames[i]) ++i;
      if (i == std::size(kCallNames)) return *why = "call: no verbs call '" + std::string(v) + "' to fail", false;
      r.call = static_cast<Call>(i);
      kind = true;
    } else if (key == "wc") {
      std::string_view s = v.substr(0, 7) == "IBV_WC_" ? v.substr(7) : v;
      size_t i = 1;  // (SUCCESS is no fault)
      while (i < std::size(kStatusNames) && s != kStatusNames[i]) ++i;
      if (i == std::size(kStatusNames)) return *why = "wc: no completion status '" + std::string(v) + "'", false;
      r.completion = true;
      r.status = static_cast<ibv_wc_status>(i);
      ++late_and_wc;
      kind = true;
    } else if (key == "late") {
      double ms;
      if (!parse_real(v, &ms) || ms <= 0 || ms > 60'000) return *why = "late: milliseconds, up to a minute", false;
      r.completion = true;
      r.late_ns = static_cast<uint64_t>(ms * 1e6);
      ++late_and_wc;
      kind = true;
    } else if (key == "event") {
      std::string_view s = v.substr(0, 10) == "IBV_EVENT_" ? v.substr(10) : v;
      if (s == "QP_FATAL") r.event_type = IBV_EVENT_QP_FATAL;
      else if (s == "CQ_ERR") r.event_type = IBV_EVENT_CQ_ERR;
      else if (s == "DEVICE_FATAL") r.event_type = IBV_EVENT_DEVICE_FATAL;
      else return *why = "event: QP_FATAL, CQ_ERR or DEVICE_FATAL, not '" + std::string(v) + "'", false;
      r.event = true;
      kind = true;
    } else if (key == "port") {
      if (v != "down") return *why = "port: down, not '" + std::string(v) + "'", false;
      r.port_down = true;
      kind = true;
    } else if (key == "for") {
      double sec;
      if (!parse_real(v, &sec) || sec < 0 || sec > 3600) return *why = "for: seconds, up to an hour", false;
      r.for_ns = static_cast<uint64_t>(sec * 1e9);
      for_given = true;
    } else if (key == "vanish") {
      if (v != "kill") return *why = "vanish: kill (the process dies of SIGKILL), not '" + std::string(v) + "'", false;
      r.event = true;
      r.vanish = true;
      kind = true;
    } else if (key == "packet") {
      size_t i = 1;
      while (i < std::size(kPacketFaults) && v != kPacketFaults[i]) ++i;
      if (v == "dup") i = static_cast<size_t>(PacketFault::kDuplicate);
      if (i == std::size(kPacketFaults))
        return *why = "packet: drop, duplicate, reorder, delay or corrupt, not '" + std::string(v) + "'", false;
      r.packet = static_cast<PacketFault>(i);
      kind = true;
    } else if (key == "dir") {
      if (v != "in" && v != "out") return *why = "dir: in or out, not '" + std::string(v) + "'", false;
      r.inbound = v == "in";
    } else if (key == "peer") {
      const std::string a(v);
      in_addr v4;
      if (inet_pton(AF_INET, a.c_str(), &v4) == 1) {
        r.peer = in6_addr{};
        r.peer.s6_addr[10] = r.peer.s6_addr[11] = 0xff;
        std::memcpy(&r.peer.s6_addr[12], &v4, 4);
      } else if (inet_pton(AF_INET6, a.c_str(), &r.peer) != 1) {
        return *why = "peer: an IPv4 or IPv6 address, not '" + a + "'", false;
      }
      r.any_peer = false;
    } else if (key == "delay") {
      double ms;
      if (!parse_real(v, &ms) || ms < 0 || ms > 60'000) return *why = "delay: milliseconds, up to a minute", false;
      r.delay_ns = static_cast<uint64_t>(ms * 1e6);
      delay_given = true;
    } else if (key == "errno") {
      if (!lookup(kErrnos, v, &r.err) || r.err == 0) return *why = "errno: '" + std::string(v) + "'", false;
    } else if (key == "opcode") {
      opcode_name = v;
    } else if (key == "qp") {
      if (!parse_u64(v, &x) || x >= 1u << 24) return *why = "qp: not a QP number", false;
      r.qpn = static_cast<int64_t>(x);
    } else if (key == "nth" || key == "every" || key == "count") {
      if (!parse_u64(v, &x) || x == 0) return *why = std::string(key) + ": a number from 1", false;
      (key == "nth" ? r.nth : key == "every" ? r.every : r.count) = x;
    } else if (key == "p") {
      if (!parse_real(v, &r.p) || r.p < 0 || r.p > 1) return *why = "p: a probability, 0 to 1", false;
    } else if (key == "after") {
      double s;
      if (!parse_real(v, &s) || s < 0) return *why = "after: seconds", false;
      r.after_ns = static_cast<uint64_t>(s * 1e9);
    } else {
      return *why = "unknown key '" + std::string(key) + "'", false;
    }
  }
  if (seed_only) return true;
  if (!kind) return *why = "none of call=, wc=, late=, event=, vanish=, packet=, port=", false;
  if (late_and_wc > 1) return *why = "wc= or late=, not both", false;
  const bool packet = r.packet != PacketFault::kNone;
  if (packet + r.completion + r.event + r.port_down + (r.call != Call::kCount) > 1)
    return *why = "one of call=, wc=, event=, vanish=, packet=, port= in a rule", false;
  if (r.port_down) {
    if (r.nth || r.every || r.p >= 0 || r.count || r.qpn >= 0 || !opcode_name.empty() || r.err || r.inbound ||
        !r.any_peer || delay_given)
      return *why = "port=down takes after= and for= only", false;
    rules->rules.push_back(std::move(r));
    return true;
  }
  if (for_given) return *why = "for= is for port= rules", false;
  if (!opcode_name.empty()) {
    if (packet) {
      if (!bth_opcode(opcode_name, &r.opcode)) return *why = "opcode: no BTH opcode '" + std::string(opcode_name) + "'", false;
    } else {
      std::string_view s = opcode_name.substr(0, 7) == "IBV_WR_" ? opcode_name.substr(7) : opcode_name;
      if (!lookup(kOpcodes, s, &r.opcode)) return *why = "opcode: '" + std::string(opcode_name) + "'", false;
    }
  }
  if (packet) {
    if (r.err) return *why = "errno= is for call= rules", false;
    if (r.inbound && (r.packet == PacketFault::kReorder || r.packet == PacketFault::kDelay))
      return *why = "dir=in: drop, duplicate or corrupt (reorder and delay are for packets on their way out)", false;
    if (r.nth && !r.count) r.count = 1;
    rules->rules.push_back(std::move(r));
    return true;
  }
  if (r.inbound || !r.any_peer || delay_given) return *why = "dir=, peer= and delay= are for packet= rules", false;
  if (!r.completion && !r.event && !r.err) r.err = ENOMEM;
  if ((r.completion || r.event) && r.err) return *why = "errno= is for call= rules", false;
  if (!r.completion && !r.event && (r.opcode >= 0 || r.qpn >= 0)) return *why = "opcode= and qp= are for wc= rules", false;
  if (r.event && r.opcode >= 0) return *why = "opcode= is for wc= rules", false;
  if (r.nth && !r.count) r.count = 1;
  rules->rules.push_back(std::move(r));
  return true;
}

}  // namespace

const char* call_name(Call c) { return static_cast<size_t>(c) < std::size(kCallNames) ? kCallNames[static_cast<size_t>(c)] : "?"; }

bool parse(std::string_view text, Rules* out, std::string* why) {
  out->rules.clear();
  int n = 0;
  while (!text.empty()) {
    const size_t end = text.find_first_of(";\n");
    std::string_view rule = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++n;
    if (const size_t hash = rule.find('#'); hash != std::string_view::npos) rule = rule.substr(0, hash);
    rule = trim_blanks(rule);
    if (rule.empty()) continue;
    std::string reason;
    if (!parse_rule(rule, out, &reason)) return *why = "rule " + std::to_string(n) + " (" + std::string(rule) + "): " + reason, false;
  }
  return true;
}

HookFlags hook_flags(const Rules& rules) {
  HookFlags f;
  for (const Rule& r : rules.rules) {
    if (r.call != Call::kCount && is_rdmacm_call(r.call)) continue;
    (r.packet != PacketFault::kNone || r.port_down ? f.packets : f.armed) = true;
  }
  return f;
}

bool fires(Rule& r, std::mt19937_64& random, uint64_t loaded_ns) {
  ++r.matched;
  if (r.count && r.fired >= r.count) return false;
  bool yes;
  if (r.nth) yes = r.matched == r.nth;
  else if (r.every) yes = r.matched % r.every == 0;
  else if (r.p >= 0) yes = std::uniform_real_distribution<double>(0, 1)(random) < r.p;
  else yes = true;
  if (yes && r.after_ns && monotonic_ns() - loaded_ns < r.after_ns) yes = false;
  if (yes) ++r.fired;
  return yes;
}

std::optional<std::string> rules_text(std::string* why) {
  std::string text = knobs().faults;
  if (text.empty() || text.find('=') != std::string::npos) return text;
  std::optional<std::string> file = read_small_file(text);  // a file of rules
  if (!file) *why = "SOFTVERBS_FAULTS=" + text + ": no rules and no readable file (" + strerror(errno) + ")";
  return file;
}

}  // namespace sv::faults
