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

namespace sv::faults {


namespace {

std::mutex g_mu;
// The port thread's: the rules changed. Never destroyed: at exit the
// thread still waits on it (a destroyed condition variable with a waiter
// blocks the exit).
std::condition_variable& g_port_cv = *new std::condition_variable;
Rules* g_rules = nullptr;  // (under g_mu)
std::mt19937_64 g_random;
uint64_t g_loaded_ns = 0;
bool g_device_fatal = false;  // an injected DEVICE_FATAL came (under g_mu)

// Whether rule `r`, matched once more now, fires; counted in the control
// page when it does. Under g_mu.
bool fires(Rule& r) {
  if (!faults::fires(r, g_random, g_loaded_ns)) return false;
  g_control.injected.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void print_at_exit() {
  if (knobs().stat_at_exit && (injected() || armed() || packets_armed()))
    std::fprintf(stderr, "  faults     injected %lu\n", static_cast<unsigned long>(injected()));
}

}  // namespace

namespace {

// The flags the hooks read, for the rules in force. Under g_mu.
void raise_flags_for(const Rules& rules) {
  const HookFlags f = hook_flags(rules);
  set_flag(&g_control.armed, f.armed);
  set_flag(&g_control.packets, f.packets);
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
    std::string why;
    const std::optional<std::string> read = rules_text(&why);
    if (!read) {
      SV_ERROR("%s: no device is listed", why.c_str());
      ok = false;
      return;
    }
    const std::string& text = *read;
    if (text.empty()) return;
    auto* rules = new Rules;
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
    SV_WARN("fault injected: %s fails with %s (rule '%s', call %lu)", call_name(c),
            strerrorname_np(r.err), r.text.c_str(), static_cast<unsigned long>(r.matched));
    if (trace::g_on) trace::instant(nullptr, "fault", (std::string(call_name(c)) + " fails with " +
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
