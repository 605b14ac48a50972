#include "shm/runtime_dir.h"

#include <cerrno>
#include <mutex>

#include "util/log.h"
#include "util/runtime_dir_rules.h"
#include "util/private_heap.h"

namespace sv::shm {

const std::string& runtime_dir() {
  // Chosen once it is had; a failure (a full /dev/shm) is tried again.
  // Never destroyed: the network thread uses it while the process exits.
  static std::mutex& mu = *new_private<std::mutex>();
  static std::string& dir = *new std::string;
  std::lock_guard g(mu);
  if (dir.empty()) {
    RuntimeDirChoice c = choose_runtime_dir();
    if (!c.warning.empty()) SV_WARN("%s", c.warning.c_str());
    if (!c.error.empty()) {
      SV_ERROR("%s", c.error.c_str());
      errno = EACCES;
    }
    dir = c.dir;
  }
  return dir;
}

}  // namespace sv::shm
