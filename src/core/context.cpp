#include "core/context.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/lid.h"
#include "core/link_watch.h"
#include "shm/robust_mutex.h"
#include "util/clock.h"
#include "util/log.h"

namespace sv {

Context* Context::create(ibv_device* dev) {
  shm::Host* host = shm::Host::get();
  if (!host) return nullptr;
  int64_t idx = host->arena().take_context_index();
  if (idx < 0) {
    errno = EMFILE;
    return nullptr;
  }
  auto* c = new Context();
  std::memset(static_cast<verbs_context*>(c), 0, sizeof(verbs_context));
  c->host = host;
  c->index = static_cast<uint32_t>(idx);
  c->shared = &host->arena().contexts()[idx];
  if (!c->async_bell.open(host->arena())) {
    int e = errno;
    host->arena().give_context_index(c->index);
    delete c;
    errno = e;
    return nullptr;
  }
  shm::ContextShared* s = c->shared;
  shm::robust_mutex_init(&s->lock);
  s->head.store(0);
  s->tail.store(0);
  s->dropped.store(0);
  s->doorbell = c->async_bell.index();
  s->doorbell_gen = c->async_bell.gen();
  s->in_use.store(1, std::memory_order_release);

  ibv_context& ic = c->context;
  ic.device = dev;
  ic.async_fd = c->async_bell.read_fd();
  // cmd_fd must be a real descriptor: it names this process's arena.
  ic.cmd_fd = dup(host->arena().fd());
  ic.num_comp_vectors = 1;
  pthread_mutex_init(&ic.mutex, nullptr);
  ic.abi_compat = __VERBS_ABI_IS_EXTENDED;
  c->sz = sizeof(verbs_context);
  link_watch::add(c);
  return c;
}

void Context::destroy() {
  link_watch::remove(this);
  shared->in_use.store(0, std::memory_order_release);
  async_bell.close(host->arena());
  host->arena().give_context_index(index);
  if (context.cmd_fd >= 0) ::close(context.cmd_fd);
  delete this;
}

void Context::refresh_gids_locked() {
  uint64_t now = monotonic_ns();
  if (gids_read_ns && now - gids_read_ns < 1'000'000'000ull) return;
  gids = read_gid_table();
  gids_read_ns = now;
}

bool Context::gid_at(int index, GidEntry* out) {
  std::lock_guard g(gid_mu);
  refresh_gids_locked();
  if (index < 0 || index >= static_cast<int>(gids.size())) return false;
  *out = gids[index];
  return true;
}

void Context::forget_gids() {
  std::lock_guard g(gid_mu);
  gids_read_ns = 0;
}

int Context::gid_count() {
  std::lock_guard g(gid_mu);
  refresh_gids_locked();
  return static_cast<int>(gids.size());
}

std::vector<GidEntry> Context::gid_table() {
  std::lock_guard g(gid_mu);
  refresh_gids_locked();
  return gids;
}

uint16_t Context::lid() {
  std::lock_guard g(gid_mu);
  refresh_gids_locked();
  return host_lid(gids);
}

bool Context::gid_of_lid(uint16_t lid, ibv_gid* out) {
  std::lock_guard g(gid_mu);
  refresh_gids_locked();
  return sv::gid_of_lid(lid, gids, out);
}

int Context::find_gid(const ibv_gid& gid) {
  std::lock_guard g(gid_mu);
  refresh_gids_locked();
  for (size_t i = 0; i < gids.size(); ++i)
    if (gid_equal(gids[i].gid, gid)) return static_cast<int>(i);
  return -1;
}

Qp* Context::qp_by_num(uint32_t qpn) {
  std::lock_guard g(objects_mu);
  auto it = qps.find(qpn);
  return it == qps.end() ? nullptr : it->second;
}

Cq* Context::cq_by_id(uint32_t id) {
  std::lock_guard g(objects_mu);
  auto it = cqs.find(id);
  return it == cqs.end() ? nullptr : it->second;
}

Srq* Context::srq_by_num(uint32_t srqn) {
  std::lock_guard g(objects_mu);
  auto it = srqs.find(srqn);
  return it == srqs.end() ? nullptr : it->second;
}

}  // namespace sv
