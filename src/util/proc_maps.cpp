#include "util/proc_maps.h"

#include <fcntl.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "util/unique_fd.h"

namespace sv {

std::vector<MapEntry> read_proc_maps() {
  std::vector<MapEntry> out;
  // Read with raw syscalls: stdio would allocate with malloc, which is fine,
  // but we want one consistent snapshot read in as few reads as possible.
  UniqueFd fd(::open("/proc/self/maps", O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return out;
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    MapEntry e;
    char perms[8] = {};
    unsigned dev_major, dev_minor;
    int path_at = 0;
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 " %n", &e.start,
                    &e.end, perms, &e.offset, &dev_major, &dev_minor, &e.inode, &path_at) < 7)
      continue;
    e.read = perms[0] == 'r';
    e.write = perms[1] == 'w';
    e.exec = perms[2] == 'x';
    e.shared = perms[3] == 's';
    if (path_at > 0 && static_cast<size_t>(path_at) < line.size()) e.path = line.substr(path_at);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace sv
