// SOFTVERBS_FAULTS' rules as text and as data: the syntax core/faults.h
// describes, parsed, and when a rule fires. A library of its own (with no
// state) because two shared libraries apply the rules: libibverbs.so
// (core/faults.h) to the verbs, librdmacm.so (rdmacm/cm_faults.h) to its
// rdma_* calls.
#pragma once

#include <infiniband/verbs.h>
#include <netinet/in.h>

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace sv::faults {

// The verbs calls a rule may name.
enum class Call : uint8_t {
  kAllocPd,
  kRegMr,
  kCreateCq,
  kCreateQp,
  kModifyQp,
  kCreateSrq,
  kCreateAh,
  kPostSend,
  kPostRecv,
  // librdmacm's (its own hooks: src/rdmacm/cm_faults.h)
  kRdmaCreateId,
  kRdmaBindAddr,
  kRdmaResolveAddr,
  kRdmaResolveRoute,
  kRdmaListen,
  kRdmaConnect,
  kRdmaAccept,
  kRdmaCreateQp,
  kCount
};

// A call's name as rules write it ("ibv_reg_mr", "rdma_connect").
const char* call_name(Call c);
// Whether librdmacm applies rules for the call (not libibverbs).
inline bool is_rdmacm_call(Call c) { return c >= Call::kRdmaCreateId && c < Call::kCount; }

// What happens to a RoCEv2 packet (packet= rules).
enum class PacketFault : uint8_t {
  kNone,
  kDrop,       // lost on the way
  kDuplicate,  // arrives twice
  kReorder,    // overtaken by the packets sent after it (held until the next send, 1 ms at most)
  kDelay,      // arrives `delay` later
  kCorrupt,    // arrives with a bad ICRC (the receiver drops it, and counts an ICRC error)
};
// One rule of SOFTVERBS_FAULTS, and what it has done.
struct Rule {
  std::string text;  // as written, for the log
  bool completion = false;
  bool event = false;                   // at a post to the QP: an async event (event=), or vanish=
  bool vanish = false;                  // vanish=kill
  ibv_event_type event_type = IBV_EVENT_QP_FATAL;
  Call call = Call::kCount;
  int err = 0;                          // call: the errno
  ibv_wc_status status = IBV_WC_SUCCESS;  // wc: the status
  uint64_t late_ns = 0;                 // late=: the completion this much late (ms in the rule)
  int opcode = -1;                      // wc: only this opcode; packet: this BTH opcode (-1: any)
  int64_t qpn = -1;                     // wc: only this QP; packet: the BTH's destination QP (-1: any)
  PacketFault packet = PacketFault::kNone;  // packet=
  bool inbound = false;                 // packet: dir=in
  bool any_peer = true;                 // packet: false with peer=
  in6_addr peer{};                      // packet: peer= (IPv4 as ::ffff:a.b.c.d)
  uint64_t delay_ns = 10'000'000;       // packet=delay: delay= (ms)
  bool port_down = false;               // port=down: the port goes down after= seconds in, for for= seconds
  uint64_t for_ns = 1'000'000'000;
  uint64_t down_since_ns = 0;           // (state: when it went down; 0 while up)
  uint64_t nth = 0, every = 0, after_ns = 0;
  double p = -1;
  uint64_t count = 0;  // at most this many faults (0: no limit; nth: 1)
  // State.
  uint64_t matched = 0, fired = 0;
};

struct Rules {
  std::vector<Rule> rules;
  uint64_t seed = 1;
};

// Parses rules (for tests, and load()): false with the reason in *why.
bool parse(std::string_view text, Rules* out, std::string* why);

// Which of libibverbs' hook flags rules need (core/fault_control.h):
// `packets` for packet= and port= rules, `armed` for the other verbs
// rules; librdmacm's calls need neither (it applies those itself).
struct HookFlags {
  bool armed = false, packets = false;
};
HookFlags hook_flags(const Rules& rules);

// Whether rule `r`, matched once more now, fires (and counts it): its
// trigger (nth, every, p drawn from `random`, after= counted from
// `loaded_ns`) and its count.
bool fires(Rule& r, std::mt19937_64& random, uint64_t loaded_ns);

// SOFTVERBS_FAULTS' text (the file's, when it names one); nothing, with
// the reason in *why, when the file cannot be read. Empty when unset.
std::optional<std::string> rules_text(std::string* why);

}  // namespace sv::faults
