#include "util/namespaces_in_use.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace sv {
namespace {

// "net:[4026531840]" -> 4026531840; 0 when it is not a network namespace.
uint64_t net_inode_of(const char* text) {
  if (std::strncmp(text, "net:[", 5) != 0) return 0;
  return std::strtoull(text + 5, nullptr, 10);
}

void add_processes(std::unordered_set<uint64_t>& in_use) {
  DIR* d = opendir("/proc");
  if (!d) return;
  char path[300], link[64];  // (d_name is at most 255 bytes)
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    std::snprintf(path, sizeof path, "/proc/%s/ns/net", e->d_name);
    const ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0) continue;  // gone meanwhile, or not ours to look at
    link[n] = '\0';
    if (uint64_t ino = net_inode_of(link)) in_use.insert(ino);
  }
  closedir(d);
}

// A mountinfo line: "id parent major:minor root mountpoint ... - fstype ...";
// an nsfs mount's root is the namespace's name.
void add_mounts(std::unordered_set<uint64_t>& in_use) {
  FILE* f = std::fopen("/proc/self/mountinfo", "re");
  if (!f) return;
  char* line = nullptr;
  size_t cap = 0;
  while (getline(&line, &cap, f) > 0) {
    if (!std::strstr(line, " - nsfs ")) continue;
    char root[128];
    if (std::sscanf(line, "%*s %*s %*s %127s", root) == 1)
      if (uint64_t ino = net_inode_of(root)) in_use.insert(ino);
  }
  std::free(line);
  std::fclose(f);
}

}  // namespace

std::unordered_set<uint64_t> network_namespaces_in_use() {
  std::unordered_set<uint64_t> in_use;
  add_processes(in_use);
  add_mounts(in_use);
  return in_use;
}

}  // namespace sv
