// Addresses of the unix sockets softverbs processes talk through (RoCE
// forwarding sockets, CM mailboxes and rendezvous). A socket of the user's
// own domain is a file in its runtime directory (util/runtime_dir_rules.h),
// which no other user can bind first or reach, with the network namespace in
// its name, as an abstract name belongs to one namespace. Header-only:
// libibverbs and librdmacm (through src/ibcm) both name them.
#pragma once

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace sv {

// This process's network namespace (the inode of /proc/self/ns/net; 0 when
// unknown).
inline uint64_t own_netns_inode() {
  struct stat st;
  return stat("/proc/self/ns/net", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

// The abstract name `name` (sun_path[0] = 0), cut to fit.
inline sockaddr_un abstract_unix_address(const std::string& name, socklen_t* len) {
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  const size_t n = std::min(name.size(), sizeof un.sun_path - 1);
  std::memcpy(un.sun_path + 1, name.data(), n);
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return un;
}

// The file `dir`/`file` when `dir` is set and the path fits; else the
// abstract name `abstract_name`.
inline sockaddr_un user_unix_address(const std::string& dir, const std::string& file,
                                     const std::string& abstract_name, socklen_t* len) {
  sockaddr_un un{};
  const std::string path = dir + "/" + file;
  if (dir.empty() || path.size() >= sizeof un.sun_path) return abstract_unix_address(abstract_name, len);
  un.sun_family = AF_UNIX;
  std::memcpy(un.sun_path, path.data(), path.size());
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
  return un;
}

}  // namespace sv
