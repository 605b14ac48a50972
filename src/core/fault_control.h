// The page through which faults are switched in a running process: the
// flags the fault hooks read (faults::armed(), faults::packets_armed()),
// the rules in force, how many faults were injected. It is a page of the
// library's own memory, at an address fixed at link time, so a hook reads
// its flag with one load, as it would a plain global; once the device is
// opened the page is replaced by a shared mapping of the file ctl.<pid> in
// the user's runtime directory (shm/runtime_dir.h). softverbs-stat reads
// the count there, and writes new rules there (`softverbs-stat -p PID -f
// RULES`): it raises the flags, the process's next hook sees them and takes
// the rules (faults::take_new_rules). A fork()ed child keeps its parent's
// rules in a private copy of the page.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace sv::faults {

inline constexpr uint32_t kControlMagic = 0x53564654;  // "SVFT"
inline constexpr uint32_t kControlVersion = 1;
inline constexpr size_t kControlBytes = 4096;

struct ControlPage {
  uint32_t magic;
  uint32_t version;
  uint32_t pid;
  // Read by the hooks: verbs rules (call=, wc=, event=) and packet= rules.
  // Plain bools, read plainly (faults::armed()): an atomic load may not be
  // hoisted or merged, and cost 4 instructions per WRITE in callgrind.
  // Written with __atomic_store_n (set_flag); a hook that reads a stale
  // value takes the new rules at its next call, as it would one call later.
  bool armed;
  bool packets;
  // A writer (softverbs-stat) holds `writer` while it writes `rules`, then
  // bumps `generation`; the process takes the rules of a generation once
  // and says so in `taken` and `status`.
  std::atomic<uint32_t> writer;
  std::atomic<uint32_t> generation;
  std::atomic<uint32_t> taken;
  std::atomic<uint64_t> injected;  // faults injected so far
  char status[256];                // what the process made of the last rules ("3 rules", or why not)
  char rules[kControlBytes - 296];  // the rules in force, as text (NUL-terminated)
};
static_assert(sizeof(ControlPage) == kControlBytes);
static_assert(offsetof(ControlPage, rules) == 296);

// This process's page (a page of its own until open_control_file()).
extern ControlPage g_control;

inline void set_flag(bool* flag, bool on) { __atomic_store_n(flag, on, __ATOMIC_RELEASE); }

// The control file of process `pid`; "" without a runtime directory.
std::string control_path(pid_t pid);
// Puts the page into ctl.<pid> (once; quietly stays private when it cannot).
void open_control_file();

// For softverbs-stat: writes `rules` (already parsed, so the flags are
// known) into another process's page and raises its flags. False with the
// reason in *why.
bool write_rules(ControlPage* page, const std::string& rules, bool armed, bool packets, std::string* why);

}  // namespace sv::faults
