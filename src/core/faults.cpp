#include "core/faults.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <random>
#include <utility>
#include <vector>

#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>

#include "core/link_watch.h"
#include "core/trace.h"
#include "net/roce_opcode.h"
#include "util/clock.h"
#include "util/knobs.h"
#include "util/log.h"
#include "util/text_fields.h"

namespace sv::faults {


namespace {

constexpr const char* kCallNames[] = {"ibv_alloc_pd",  "ibv_reg_mr",    "ibv_create_cq", "ibv_create_qp", "ibv_modify_qp",
                                      "ibv_create_srq", "ibv_create_ah", "ibv_post_send", "ibv_post_recv"};
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
                             {"ENOBUFS", ENOBUFS}, {"EMFILE", EMFILE}};
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

std::mutex g_mu;
// The port thread's: the rules changed. Never destroyed: at exit the
// thread still waits on it (a destroyed condition variable with a waiter
// blocks the exit).
std::condition_variable& g_port_cv = *new std::condition_variable;
Rules* g_rules = nullptr;  // (under g_mu)
std::mt19937_64 g_random;
uint64_t g_loaded_ns = 0;
bool g_device_fatal = false;  // an injected DEVICE_FATAL came (under g_mu)

// Whether rule `r`, matched once more now, fires. Under g_mu.
bool fires(Rule& r) {
  ++r.matched;
  if (r.count && r.fired >= r.count) return false;
  bool yes;
  if (r.nth) yes = r.matched == r.nth;
  else if (r.every) yes = r.matched % r.every == 0;
  else if (r.p >= 0) yes = std::uniform_real_distribution<double>(0, 1)(g_random) < r.p;
  else yes = true;
  if (yes && r.after_ns && monotonic_ns() - g_loaded_ns < r.after_ns) yes = false;
  if (yes) {
    ++r.fired;
    g_control.injected.fetch_add(1, std::memory_order_relaxed);
  }
  return yes;
}

void print_at_exit() {
  if (knobs().stat_at_exit && (injected() || armed() || packets_armed()))
    std::fprintf(stderr, "  faults     injected %lu\n", static_cast<unsigned long>(injected()));
}

}  // namespace

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

namespace {

// The flags the hooks read, for the rules in force. Under g_mu.
void raise_flags_for(const Rules& rules) {
  bool armed = false, packets = false;
  for (const Rule& r : rules.rules) (r.packet != PacketFault::kNone || r.port_down ? packets : armed) = true;
  set_flag(&g_control.armed, armed);
  set_flag(&g_control.packets, packets);
}

void start_port_thread_locked();

void install_locked(Rules rules) {
  SV_INFO("fault rules: %zu, seed %lu", rules.rules.size(), static_cast<unsigned long>(rules.seed));
  g_random.seed(rules.seed);
  g_loaded_ns = monotonic_ns();
  raise_flags_for(rules);
  bool ports = false;
  for (const Rule& r : rules.rules) ports |= r.port_down;
  delete std::exchange(g_rules, new Rules(std::move(rules)));  // (read only under g_mu)
  // A port held down by rules that are gone comes back.
  if (link_watch::forced_down()) link_watch::force_down(false);
  if (ports) start_port_thread_locked();
  g_port_cv.notify_all();
}

// port=down rules: a thread (started with the first such rule, asleep
// until the next rule is due) takes the port down and up again on time,
// whether or not the application calls anything. Under g_mu, but while it
// waits.
void port_thread() {
  pthread_setname_np(pthread_self(), "softverbs-fault");
  std::unique_lock lk(g_mu);
  for (;;) {
    const uint64_t now = monotonic_ns();
    uint64_t next = UINT64_MAX;
    Rule* due = nullptr;
    std::vector<Rule> none;
    std::vector<Rule>& rules = g_rules ? g_rules->rules : none;
    for (Rule& r : rules) {
      if (!r.port_down || r.fired == 2) continue;
      const uint64_t at = r.down_since_ns ? r.down_since_ns + r.for_ns : g_loaded_ns + r.after_ns;
      if (at < next) next = at, due = &r;
    }
    if (!due) {
      g_port_cv.wait(lk);
      continue;
    }
    if (next > now) {
      g_port_cv.wait_until(lk, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(next)));
      continue;
    }
    Rule& r = *due;
    if (!r.down_since_ns) {
      ++r.matched;
      r.fired = 1;
      r.down_since_ns = now;
      g_control.injected.fetch_add(1, std::memory_order_relaxed);
      SV_WARN("fault injected: port 1 down for %.3f s (rule '%s')", r.for_ns / 1e9, r.text.c_str());
      if (trace::g_on) trace::instant(nullptr, "fault", ("port 1 down (" + r.text + ")").c_str());
      link_watch::force_down(true);
    } else {
      r.fired = 2;
      SV_WARN("fault injected: port 1 up again (rule '%s')", r.text.c_str());
      if (trace::g_on) trace::instant(nullptr, "fault", ("port 1 up again (" + r.text + ")").c_str());
      link_watch::force_down(false);
    }
  }
}

void start_port_thread_locked() {
  static bool started = false;
  if (started) return;
  started = true;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // signals stay with the application's threads
  std::thread(port_thread).detach();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void set_status(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void set_status(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(g_control.status, sizeof g_control.status, fmt, ap);
  va_end(ap);
}

// Rules softverbs-stat wrote into the control page (generation `gen`), in
// force from now on; refused (with the reason in the page's status) when
// they do not parse, and those before stay. Under g_mu.
void take_from_page_locked(uint32_t gen) {
  char text[sizeof g_control.rules];
  std::memcpy(text, g_control.rules, sizeof text);
  text[sizeof text - 1] = 0;
  if (g_control.generation.load(std::memory_order_acquire) != gen) return;  // (being rewritten: the next hook takes it)
  Rules rules;
  std::string why;
  if (!parse(text, &rules, &why)) {
    SV_WARN("fault rules from outside refused: %s; the rules before stay", why.c_str());
    set_status("generation %u refused: %s", gen, why.c_str());
    if (g_rules) raise_flags_for(*g_rules);
  } else {
    SV_WARN("fault rules from outside: '%s' (%zu rules)", text, rules.rules.size());
    set_status("generation %u: %zu rules in force", gen, rules.rules.size());
    install_locked(std::move(rules));
  }
  g_control.taken.store(gen, std::memory_order_release);
  if (g_control.generation.load(std::memory_order_acquire) != gen) {  // newer ones came meanwhile: the next hook takes them
    set_flag(&g_control.armed, true);
    set_flag(&g_control.packets, true);
  }
}

// The rules in force, after taking any the control page brought. Under g_mu.
Rules* current_locked() {
  const uint32_t gen = g_control.generation.load(std::memory_order_acquire);
  if (__builtin_expect(gen != g_control.taken.load(std::memory_order_relaxed), 0)) take_from_page_locked(gen);
  return g_rules;
}

}  // namespace

bool load() {
  static std::once_flag once;
  static bool ok = true;
  std::call_once(once, [] {
    open_control_file();
    std::atexit(print_at_exit);
    std::string text = knobs().faults;
    if (text.empty()) return;
    if (text.find('=') == std::string::npos) {  // a file of rules
      std::optional<std::string> file = read_text_file(text);
      if (!file) {
        SV_ERROR("SOFTVERBS_FAULTS=%s: no rules and no readable file (%s): no device is listed", text.c_str(),
                 strerror(errno));
        ok = false;
        return;
      }
      text = std::move(*file);
    }
    auto* rules = new Rules;
    std::string why;
    if (!parse(text, rules, &why)) {
      delete rules;
      SV_ERROR("SOFTVERBS_FAULTS: %s: no device is listed", why.c_str());
      ok = false;
      return;
    }
    replace_rules(std::move(*rules));
    delete rules;
    // What softverbs-stat shows as the rules in force.
    std::snprintf(g_control.rules, sizeof g_control.rules, "%s", text.c_str());
    set_status("%zu rules from SOFTVERBS_FAULTS", g_rules ? g_rules->rules.size() : size_t{0});
  });
  return ok;
}

void replace_rules(Rules rules) {
  std::lock_guard g(g_mu);
  install_locked(std::move(rules));
}

int call_fault(Call c) {
  std::lock_guard g(g_mu);
  // After an injected DEVICE_FATAL, what needs the device fails as on a
  // device whose driver was torn down (the kernel's uverbs: EIO).
  if (g_device_fatal && c != Call::kPostSend && c != Call::kPostRecv) return EIO;
  Rules* rules = current_locked();
  if (!rules) return 0;
  for (Rule& r : rules->rules) {
    if (r.completion || r.event || r.call != c || !fires(r)) continue;
    SV_WARN("fault injected: %s fails with %s (rule '%s', call %lu)", kCallNames[static_cast<int>(c)],
            strerrorname_np(r.err), r.text.c_str(), static_cast<unsigned long>(r.matched));
    if (trace::g_on) trace::instant(nullptr, "fault", (std::string(kCallNames[static_cast<int>(c)]) + " fails with " +
                                                       strerrorname_np(r.err) + " (" + r.text + ")").c_str());
    return r.err;
  }
  return 0;
}

bool completion_fault_slow(uint32_t qpn, ibv_wr_opcode opcode, CompletionFault* f) {
  std::lock_guard g(g_mu);
  Rules* rules = current_locked();
  if (!rules) return false;
  for (Rule& r : rules->rules) {
    if (!r.completion || r.event || (r.qpn >= 0 && static_cast<uint32_t>(r.qpn) != qpn) || (r.opcode >= 0 && r.opcode != opcode))
      continue;
    if (!fires(r)) continue;
    char what[200];
    if (r.late_ns)
      std::snprintf(what, sizeof what, "QP %#x work request %lu of rule '%s' completes %.3f ms late", qpn,
                    static_cast<unsigned long>(r.matched), r.text.c_str(), r.late_ns / 1e6);
    else
      std::snprintf(what, sizeof what, "QP %#x work request %lu of rule '%s' completes with %s", qpn,
                    static_cast<unsigned long>(r.matched), r.text.c_str(), ibv_wc_status_str(r.status));
    SV_WARN("fault injected: %s", what);
    if (trace::g_on) trace::instant(nullptr, "fault", what);
    *f = CompletionFault{r.status, r.late_ns};
    return true;
  }
  return false;
}

PostFault post_fault_slow(uint32_t qpn, bool recv) {
  std::lock_guard g(g_mu);
  Rules* rules = current_locked();
  if (!rules) return PostFault::kNone;
  for (Rule& r : rules->rules) {
    if (!r.event || (recv && !r.vanish) || (r.qpn >= 0 && static_cast<uint32_t>(r.qpn) != qpn) || !fires(r)) continue;
    char what[200];
    std::snprintf(what, sizeof what, "QP %#x, post %lu of rule '%s': %s", qpn, static_cast<unsigned long>(r.matched),
                  r.text.c_str(), r.vanish ? "the process vanishes (SIGKILL)" : ibv_event_type_str(r.event_type));
    SV_WARN("fault injected: %s", what);
    if (trace::g_on) trace::instant(nullptr, "fault", what);
    if (r.vanish) return PostFault::kVanish;
    if (r.event_type == IBV_EVENT_DEVICE_FATAL) {
      g_device_fatal = true;
      return PostFault::kDeviceFatal;
    }
    return r.event_type == IBV_EVENT_CQ_ERR ? PostFault::kCqErr : PostFault::kQpFatal;
  }
  return PostFault::kNone;
}

PacketVerdict packet_fault_slow(bool inbound, const in6_addr& peer, uint32_t dest_qpn, uint8_t opcode) {
  if (link_watch::forced_down()) return {PacketFault::kDrop};  // (a port down carries nothing)
  std::lock_guard g(g_mu);
  Rules* rules = current_locked();
  if (!rules) return {};
  for (Rule& r : rules->rules) {
    if (r.packet == PacketFault::kNone || r.inbound != inbound || (r.qpn >= 0 && static_cast<uint32_t>(r.qpn) != dest_qpn) ||
        (r.opcode >= 0 && r.opcode != opcode) || (!r.any_peer && std::memcmp(&r.peer, &peer, sizeof peer) != 0) ||
        !fires(r))
      continue;
    // A rule may fire on thousands of packets: the first ones are logged
    // at warn, the rest at debug (all are counted, and on the timeline).
    constexpr uint64_t kWarned = 10;
    char addr[INET6_ADDRSTRLEN] = "";
    inet_ntop(AF_INET6, &peer, addr, sizeof addr);
    const net::OpcodeInfo* info = net::opcode_info(opcode);
    char what[200];
    std::snprintf(what, sizeof what, "packet %lu of rule '%s' (%s %s %s, QP %#x) %s",
                  static_cast<unsigned long>(r.matched), r.text.c_str(), info ? info->name : "opcode?",
                  inbound ? "from" : "to", addr, dest_qpn,
                  r.packet == PacketFault::kDrop        ? "dropped"
                  : r.packet == PacketFault::kDuplicate ? "duplicated"
                  : r.packet == PacketFault::kReorder   ? "reordered"
                  : r.packet == PacketFault::kDelay     ? "delayed"
                                                        : "corrupted (bad ICRC)");
    if (r.fired <= kWarned) SV_WARN("fault injected: %s%s", what, r.fired == kWarned ? " (more of this rule: log level debug)" : "");
    else SV_DEBUG("fault injected: %s", what);
    if (trace::g_on) trace::instant(nullptr, "fault", what);
    return PacketVerdict{r.packet, r.delay_ns};
  }
  return {};
}

uint64_t injected() { return g_control.injected.load(std::memory_order_relaxed); }

}  // namespace sv::faults
