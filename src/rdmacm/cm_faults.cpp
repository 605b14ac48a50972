#include "cm_faults.h"

#include <cstring>
#include <mutex>
#include <random>
#include <string>

#include "util/clock.h"
#include "util/log.h"

namespace sv::rdmacm {
namespace {

struct CmFaults {
  std::mutex mu;
  faults::Rules rules;  // only the rules for librdmacm's calls
  std::mt19937_64 random;
  uint64_t loaded_ns = 0;
};

// The rules, read once; nullptr without any for librdmacm's calls.
CmFaults* cm_faults() {
  static CmFaults* const f = []() -> CmFaults* {
    std::string why;
    const std::optional<std::string> text = faults::rules_text(&why);
    faults::Rules all;
    // (Rules that cannot be read or parsed: libibverbs says why, and lists
    // no device.)
    if (!text || text->empty() || !faults::parse(*text, &all, &why)) return nullptr;
    auto* mine = new CmFaults;  // (never freed: read until exit)
    for (faults::Rule& r : all.rules)
      if (r.call != faults::Call::kCount && faults::is_rdmacm_call(r.call)) mine->rules.rules.push_back(std::move(r));
    if (mine->rules.rules.empty()) {
      delete mine;
      return nullptr;
    }
    mine->random.seed(all.seed);
    mine->loaded_ns = monotonic_ns();
    return mine;
  }();
  return f;
}

}  // namespace

int call_fault(faults::Call c) {
  CmFaults* f = cm_faults();
  if (__builtin_expect(!f, 1)) return 0;
  std::lock_guard g(f->mu);
  for (faults::Rule& r : f->rules.rules) {
    if (r.call != c || !faults::fires(r, f->random, f->loaded_ns)) continue;
    SV_WARN("fault injected: %s fails with %s (rule '%s', call %lu)", faults::call_name(c), strerrorname_np(r.err),
            r.text.c_str(), static_cast<unsigned long>(r.matched));
    return r.err;
  }
  return 0;
}

}  // namespace sv::rdmacm
