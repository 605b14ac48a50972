// Adding entries to a directory the caller may not write (/dev, /sys/class)
// for the processes of one mount namespace: the directory is covered with a
// tmpfs that holds a bind mount of each original entry (so devices, sockets
// and submounts such as /dev/pts or /dev/shm behave as before) plus the new
// entries, each a bind mount of an existing file or directory. This is how
// container runtimes populate /dev; it needs CAP_SYS_ADMIN in the user
// namespace that owns the mount namespace, not root on the host.
#pragma once

#include <string>
#include <vector>

namespace sv::run {

struct Extra {
  std::string path;    // relative to the directory, e.g. "infiniband/uverbs0"
  std::string source;  // what is bind-mounted there
};

// Covers `dir` and adds `extras`. An extra whose parent exists in the
// original (/dev/infiniband on a host with real RDMA devices) overlays that
// parent in turn, so nothing that was there disappears. On failure, returns
// false with a message in `error`.
bool overlay_dir(const std::string& dir, const std::vector<Extra>& extras, std::string* error);

}  // namespace sv::run
