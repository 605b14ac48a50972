// How the user's runtime directory is chosen (shm/runtime_dir.h says why),
// and where a named domain's registry is.
// Header-only: libibverbs (core) and librdmacm (through src/ibcm, for the
// CM's mailboxes) must find the same directory, and librdmacm does not link
// core. The choice says what it did; each library logs it its own way.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "util/shared_layout_version.h"
#include "util/knobs.h"
#include "util/unix_socket_address.h"

namespace sv {

struct RuntimeDirChoice {
  std::string dir;      // "" when there is none we may trust
  std::string warning;  // set when the default place was taken by someone else
  std::string error;    // set when dir is ""
};

namespace runtime_dir_detail {

inline const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// Ours alone: a directory (not a link to one), owned by our effective uid,
// that no one else may enter. `*owner` gets the uid it belongs to.
inline bool ours_alone(const std::string& dir, uid_t* owner = nullptr) {
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) return false;
  if (owner) *owner = st.st_uid;
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
    errno = EACCES;
    return false;
  }
  return true;
}

// Creates `dir` (mode 0700) when absent; true when it is then ours alone.
inline bool make_ours(const std::string& dir, uid_t* owner = nullptr) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return false;
  return ours_alone(dir, owner);
}

// A parent we may create our directory in: ours, and no one else may
// write to it (else they could swap our directory for theirs).
inline bool safe_parent(const char* dir) {
  struct stat st;
  return dir && stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
         (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

}  // namespace runtime_dir_detail

inline std::string default_runtime_dir(unsigned uid) { return "/dev/shm/softverbs-uid" + std::to_string(uid); }

// What ends a registry's file name: the layout version (builds with
// different layouts never share one) and the network namespace (each is a
// host, with registry slots of its own: namespace hosts on one machine do
// not share a process limit). ".v<layout>.net<inode>", or ".v<layout>"
// where the namespace cannot be told.
inline std::string registry_suffix() {
  std::string s = ".v" + std::to_string(kSharedLayoutVersion);
  if (const uint64_t netns = own_netns_inode()) s += ".net" + std::to_string(netns);
  return s;
}

// The registry of a domain named on purpose (SOFTVERBS_DOMAIN): a file in
// /dev/shm anyone who names it may join, as its mode allows.
inline std::string named_domain_registry(const std::string& domain) {
  return "/dev/shm/softverbs-" + domain + registry_suffix();
}

inline RuntimeDirChoice choose_runtime_dir() {
  using namespace runtime_dir_detail;
  RuntimeDirChoice c;
  if (const std::string& d = knobs().runtime_dir; !d.empty()) {
    if (make_ours(d)) {
      c.dir = d;
    } else {
      c.error = std::string("SOFTVERBS_RUNTIME_DIR ") + d + " is not a directory of ours alone (mode 0700): " +
                strerror(errno);
    }
    return c;
  }
  const std::string first = default_runtime_dir(geteuid());
  uid_t owner = geteuid();
  if (make_ours(first, &owner)) {
    c.dir = first;
    return c;
  }
  const int err = errno;
  const std::string why = owner != geteuid() ? "belongs to uid " + std::to_string(owner)
                                             : std::string("is not a directory of ours alone (") + strerror(err) + ")";
  std::string other;
  if (const char* xdg = env("XDG_RUNTIME_DIR"); safe_parent(xdg)) {
    other = std::string(xdg) + "/softverbs";
  } else if (const char* home = env("HOME"); safe_parent(home)) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    const std::string base = std::string(home) + "/.softverbs-runtime";
    if (make_ours(base)) other = base + "/" + host;
  }
  if (!other.empty() && make_ours(other)) {
    c.dir = other;
    c.warning = first + " " + why + ": keeping our state in " + other +
                " instead (processes of ours that have neither this XDG_RUNTIME_DIR nor this HOME will not "
                "find it; SOFTVERBS_RUNTIME_DIR chooses one for all)";
    return c;
  }
  c.error = first + " " + why +
            ", and there is no XDG_RUNTIME_DIR or HOME of ours to use instead: set SOFTVERBS_RUNTIME_DIR to a "
            "directory of ours";
  return c;
}

}  // namespace sv
