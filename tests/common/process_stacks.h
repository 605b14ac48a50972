// Where a process's threads are: for a test that found one hung (itself, or
// a child it waited for), so that a hang seen once in CI says where it was.
// Header-only: each gtest binary and the watchdog include it.
#pragma once

#include <dirent.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace sv::test {

inline std::string read_proc_text(const std::string& path, bool first_line_only) {
  std::ifstream in(path);
  if (!first_line_only) {
    std::ostringstream all;
    all << in.rdbuf();
    return all.str();
  }
  std::string line;
  std::getline(in, line);
  return line;
}

// Without gdb: each thread's name, state and where in the kernel it waits
// (and its kernel stack, where we may read it: as root).
inline void print_wait_channels(pid_t pid) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(tasks.c_str());
  if (!d) return;
  while (dirent* t = readdir(d)) {
    if (t->d_name[0] == '.') continue;
    const std::string dir = tasks + "/" + t->d_name;
    std::fprintf(stderr, "  thread %s (%s): wchan %s, syscall %s\n%s", t->d_name,
                 read_proc_text(dir + "/comm", true).c_str(), read_proc_text(dir + "/wchan", true).c_str(),
                 read_proc_text(dir + "/syscall", true).c_str(), read_proc_text(dir + "/stack", false).c_str());
  }
  closedir(d);
}

// Every thread's backtrace, by gdb attached to `pid`. Started with
// posix_spawn, not fork(): fork() runs the pthread_atfork handlers, and the
// library's take locks that the hung thread may hold (its attach lock is
// held while a process claims its registry slot).
inline bool print_gdb_backtraces(pid_t pid) {
  if (access("/usr/bin/gdb", X_OK) != 0) return false;
  if (pid == getpid()) prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY);  // Yama: let our child attach to us
  const std::string target = std::to_string(pid);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  const char* argv[] = {"gdb", "-q", "-batch", "-nx", "-p", target.c_str(), "-ex", "thread apply all bt", nullptr};
  pid_t gdb = -1;
  const int rc = posix_spawn(&gdb, "/usr/bin/gdb", &actions, nullptr, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return false;
  int status = 0;
  while (waitpid(gdb, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

inline void print_process_stacks(pid_t pid) {
  print_wait_channels(pid);
  print_gdb_backtraces(pid);
}

}  // namespace sv::test
