#include "shm/runtime_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

namespace {

// Gone, or a zombie: killed and not yet reaped by its parent (it still has
// its pid, but nothing of it runs). A live process that has the pid again
// is not gone: its files have the same names.
bool process_gone(long pid) {
  if (pid <= 0) return false;
  if (kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  char path[64], buf[256];
  std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  const char* end = std::strrchr(buf, ')');  // (after the command name, which may hold anything)
  return end && end[1] == ' ' && (end[2] == 'Z' || end[2] == 'X');
}

}  // namespace

void remove_files_of_dead_processes() {
  const std::string& dir = runtime_dir();
  DIR* d = dir.empty() ? nullptr : opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = readdir(d))
    for (const char* prefix : kPidFilePrefixes) {
      const size_t n = std::strlen(prefix);
      if (std::strncmp(e->d_name, prefix, n) != 0) continue;
      if (process_gone(std::strtol(e->d_name + n, nullptr, 10))) unlinkat(dirfd(d), e->d_name, 0);
      break;
    }
  closedir(d);
}

bool remove_files_of_gone_process(int pid) {
  const std::string& dir = runtime_dir();
  if (dir.empty() || !process_gone(pid)) return false;
  for (const char* prefix : kPidFilePrefixes) unlink((dir + "/" + prefix + std::to_string(pid)).c_str());
  return true;
}

}  // namespace sv::shm
