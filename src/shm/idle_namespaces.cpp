#include "shm/idle_namespaces.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "shm/layout.h"
#include "util/log.h"
#include "util/namespaces_in_use.h"
#include "util/unix_socket_address.h"

namespace sv::shm {
namespace {

// The per-namespace socket files: "<kind>-<inode>-<rest>" (the RoCE
// forwarding sockets of transport/roce_forward.cpp, the CM mailboxes of
// ibcm/gsi_mailbox.cpp).
constexpr const char* kPerNamespaceKinds[] = {"roce-", "gsi-"};

// A namespace's registry is "<prefix><inode>" (util/runtime_dir_rules.h's
// registry_suffix).
std::string registry_prefix() { return "registry.v" + std::to_string(kLayoutVersion) + ".net"; }

// The registry behind `fd`, mapped (`writable` for its claims lock), or
// nullptr when it is not one of this layout.
RegistryHeader* map_registry(int fd, bool writable) {
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(RegistryHeader)) return nullptr;
  void* p = mmap(nullptr, sizeof(RegistryHeader), writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* hdr = static_cast<RegistryHeader*>(p);
  if (hdr->magic == kRegistryMagic && hdr->version == kLayoutVersion && hdr->header_size == sizeof(RegistryHeader))
    return hdr;
  munmap(p, sizeof(RegistryHeader));
  return nullptr;
}

// True when no slot of the registry is held by a live process.
bool no_live_slot(const RegistryHeader* hdr) {
  const uint32_t used = hdr->slots_in_use();
  for (uint32_t s = 1; s < used; ++s)
    if (hdr->procs[s].state.load(std::memory_order_acquire) == kProcLive && proc_alive(hdr->procs[s])) return false;
  return true;
}

// The names in `dir`, read once for the whole sweep.
std::vector<std::string> names_in(int dirfd) {
  std::vector<std::string> names;
  const int fd = dup(dirfd);  // (closedir closes what fdopendir took)
  DIR* d = fd >= 0 ? fdopendir(fd) : nullptr;
  if (!d) {
    if (fd >= 0) close(fd);
    return names;
  }
  while (dirent* e = readdir(d)) names.emplace_back(e->d_name);
  closedir(d);
  return names;
}

// The socket files named by namespace `netns` among `names`.
void remove_socket_files_of(int dirfd, const std::vector<std::string>& names, uint64_t netns) {
  const std::string middle = std::to_string(netns) + "-";
  for (const std::string& n : names)
    for (const char* kind : kPerNamespaceKinds) {
      const size_t k = std::strlen(kind);
      if (n.compare(0, k, kind) == 0 && n.compare(k, middle.size(), middle) == 0) unlinkat(dirfd, n.c_str(), 0);
    }
}

}  // namespace

bool namespace_registry_idle(const std::string& dir, uint64_t netns) {
  if (dir.empty()) return false;
  const std::string path = dir + "/" + registry_prefix() + std::to_string(netns);
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;
  const RegistryHeader* hdr = map_registry(fd, false);
  close(fd);
  const bool idle = hdr && no_live_slot(hdr);
  if (hdr) munmap(const_cast<RegistryHeader*>(hdr), sizeof(RegistryHeader));
  return idle;
}

void remove_state_of_idle_namespaces(const std::string& dir) {
  const std::string prefix = registry_prefix();
  const uint64_t own = own_netns_inode();
  if (!own || dir.empty()) return;
  const int dirfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) return;
  const std::vector<std::string> names = names_in(dirfd);
  std::vector<uint64_t> candidates;
  for (const std::string& n : names) {
    if (n.compare(0, prefix.size(), prefix) != 0) continue;
    char* end = nullptr;
    const uint64_t netns = std::strtoull(n.c_str() + prefix.size(), &end, 10);
    if (netns && netns != own && *end == '\0') candidates.push_back(netns);
  }
  if (candidates.empty()) {
    close(dirfd);
    return;
  }
  const auto in_use = network_namespaces_in_use();
  unsigned removed = 0;
  for (uint64_t netns : candidates) {
    if (in_use.count(netns)) continue;
    const std::string name = prefix + std::to_string(netns);
    const int fd = openat(dirfd, name.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st;
    // Under its flock (a process of the namespace making it) and its
    // claims lock (one claiming a slot), both taken without waiting:
    // another process sweeping, or one of the namespace's attaching, and
    // it is left alone.
    RegistryHeader* hdr = nullptr;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink > 0 &&
        st.st_uid == geteuid() && (hdr = map_registry(fd, true))) {
      int rc = pthread_mutex_trylock(&hdr->claims);
      if (rc == EOWNERDEAD) rc = pthread_mutex_consistent(&hdr->claims);
      if (rc == 0) {
        if (no_live_slot(hdr)) {
          remove_socket_files_of(dirfd, names, netns);
          unlinkat(dirfd, name.c_str(), 0);
          ++removed;
        }
        pthread_mutex_unlock(&hdr->claims);
      }
      munmap(hdr, sizeof(RegistryHeader));
    }
    close(fd);  // (and the flock)
  }
  close(dirfd);
  if (removed) SV_DEBUG("removed the registries and socket files of %u network namespaces that are gone", removed);
}

}  // namespace sv::shm
