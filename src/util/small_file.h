// A small file's whole text through open() and read(), for what a process
// reads as it opens the device (the machine id, a netdev's flags, its
// sysfs view, a profile): std::ifstream's first use in a process builds
// the C++ locale, ~0.5 ms of a process's start-up on a VM with shadow page
// tables (its first touches of libstdc++'s pages), paid again by every
// process a launcher forks.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string>

namespace sv {

// Nothing when the file cannot be opened (errno says why). extra_flags:
// e.g. O_NOFOLLOW.
inline std::optional<std::string> read_small_file(const std::string& path, int extra_flags = 0) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | extra_flags);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) text.append(buf, static_cast<size_t>(n));
  const int read_errno = errno;
  ::close(fd);
  if (n < 0) {
    errno = read_errno;
    return std::nullopt;
  }
  return text;
}

}  // namespace sv
