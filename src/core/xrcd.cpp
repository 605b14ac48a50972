#include "core/xrcd.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

#include "core/device_profile.h"
#include "shm/robust_mutex.h"
#include "shm/shared_lock.h"

namespace sv {
namespace {

// Members whose process died are forgotten.
bool has_live_member(const shm::RegistryHeader& reg, shm::XrcdEntry& e) {
  bool live = false;
  for (auto& m : e.members) {
    uint32_t w = m.load(std::memory_order_relaxed);
    if (!w) continue;
    if (shm::lock_holder_dead(reg, w))
      m.store(0, std::memory_order_relaxed);
    else
      live = true;
  }
  return live;
}

bool add_member(shm::XrcdEntry& e, uint32_t me) {
  for (auto& m : e.members) {
    if (m.load(std::memory_order_relaxed) == 0) {
      m.store(me, std::memory_order_relaxed);
      return true;
    }
  }
  return false;
}

}  // namespace

Xrcd* open_xrcd(Context* ctx, const ibv_xrcd_init_attr& attr) {
  // A profile of a device without XRC (rxe, siw): its provider has no open_xrcd.
  if (!(device_profile().device_cap_flags & IBV_DEVICE_XRC)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  constexpr uint32_t kNeeded = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  if (attr.comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if ((attr.comp_mask & kNeeded) != kNeeded || (attr.oflags & ~(O_CREAT | O_EXCL))) {
    errno = EINVAL;
    return nullptr;
  }
  struct stat st {};
  const bool anonymous = attr.fd == -1;
  if (!anonymous && fstat(attr.fd, &st) != 0) {
    errno = EBADF;
    return nullptr;
  }
  shm::Host& host = *ctx->host;
  shm::RegistryHeader& reg = *host.registry().header();
  const uint32_t me = shm::lock_owner_id(host.slot(), host.incarnation());
  shm::RobustLock lock(&reg.xrcds.lock);
  int found = -1, free_entry = -1;
  for (uint32_t i = 0; i < shm::kMaxXrcds; ++i) {
    shm::XrcdEntry& e = reg.xrcds.entries[i];
    if (!has_live_member(reg, e)) {
      if (free_entry < 0) free_entry = static_cast<int>(i);
      continue;
    }
    if (!anonymous && !e.anonymous && e.dev == st.st_dev && e.ino == st.st_ino) found = static_cast<int>(i);
  }
  if (found >= 0 && (attr.oflags & O_EXCL)) {
    errno = EINVAL;
    return nullptr;
  }
  if (found < 0) {
    if (!anonymous && !(attr.oflags & O_CREAT)) {
      errno = EINVAL;
      return nullptr;
    }
    if (free_entry < 0) {
      errno = ENOMEM;
      return nullptr;
    }
    found = free_entry;
    shm::XrcdEntry& e = reg.xrcds.entries[found];
    e.dev = anonymous ? 0 : st.st_dev;
    e.ino = anonymous ? 0 : st.st_ino;
    e.anonymous = anonymous;
    ++e.generation;
  }
  shm::XrcdEntry& e = reg.xrcds.entries[found];
  if (!add_member(e, me)) {
    errno = ENOMEM;
    return nullptr;
  }
  auto* x = new Xrcd();
  x->context = ctx->ibv();
  x->ctx = ctx;
  x->index = static_cast<uint32_t>(found);
  x->id = shm::xrcd_id(x->index, e.generation);
  return x;
}

int close_xrcd(Xrcd* x) {
  if (x->users.load() != 0) return EBUSY;
  shm::Host& host = *x->ctx->host;
  shm::RegistryHeader& reg = *host.registry().header();
  const uint32_t me = shm::lock_owner_id(host.slot(), host.incarnation());
  {
    shm::RobustLock lock(&reg.xrcds.lock);
    for (auto& m : reg.xrcds.entries[x->index].members) {
      if (m.load(std::memory_order_relaxed) == me) {
        m.store(0, std::memory_order_relaxed);
        break;
      }
    }
  }
  delete x;
  return 0;
}

}  // namespace sv
