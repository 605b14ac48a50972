#include "core/context.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/lid.h"
#include "core/link_watch.h"
#include "shm/robust_mutex.h"
#include "util/clock.h"
#include "util/log.h"

namespace sv {

bool Context::attach(shm::Host* h) {
  int64_t idx = h->arena().take_context_index();
  if (idx < 0) {
    errno = EMFILE;
    return false;
  }
  if (!async_bell.open(h->arena())) {
    int e = errno;
    h->arena().give_context_index(static_cast<uint32_t>(idx));
    errno = e;
    return false;
  }
  host = h;
  fork_generation = shm::Host::fork_generation();
  index = static_cast<uint32_t>(idx);
  shared = &h->arena().contexts()[idx];
  shm::ContextShared* s = shared;
  shm::robust_mutex_init(&s->lock);
  s->head.store(0);
  s->tail.store(0);
  s->dropped.store(0);
  s->doorbell = async_bell.index();
  s->doorbell_gen = async_bell.gen();
  s->in_use.store(1, std::memory_order_release);
  return true;
}

Context* Context::create(ibv_device* dev) {
  shm::Host* host = shm::Host::get();
  if (!host) return nullptr;
  auto* c = new Context();
  std::memset(static_cast<verbs_context*>(c), 0, sizeof(verbs_context));
  if (!c->attach(host)) {
    int e = errno;
    delete c;
    errno = e;
    return nullptr;
  }
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

// In a fork() child: the context joins the child's own host (registry slot,
// arena, doorbell) and keeps the descriptors the application knows
// (async_fd, cmd_fd), now naming the child's. What the parent made with it
// (QPs, CQs ...) lives in the parent's arena, which the child does not map:
// it is forgotten, as a child cannot use a parent's queues on a NIC either.
void Context::reopen_in_fork_child() {
  static std::mutex reopen_mu;
  std::lock_guard g(reopen_mu);
  if (fork_generation == shm::Host::fork_generation()) return;
  shm::Host* h = shm::Host::get();
  // Locks a parent thread may have held at the fork start unlocked.
  new (&gid_mu) std::mutex;
  new (&objects_mu) std::mutex;
  new (&async_mu) std::mutex;
  pthread_mutex_init(&context.mutex, nullptr);
  qps.clear();
  cqs.clear();
  srqs.clear();
  gids.clear();
  gids_read_ns = 0;
  cq_count.store(0);
  ah_count.store(0);
  new (&async_bell) shm::Doorbell;
  if (!h || !attach(h)) {
    SV_ERROR("a context inherited through fork() cannot be reopened in the child: %s", strerror(errno));
    std::abort();  // its memory is the parent's, unmapped here: no use of it could be safe
  }
  if (context.async_fd >= 0) dup2(async_bell.read_fd(), context.async_fd);
  if (context.cmd_fd >= 0) dup2(h->arena().fd(), context.cmd_fd);
  local_transport = make_local_transport ? make_local_transport(this) : nullptr;  // the parent's is left behind
  link_watch::add(this);
  SV_DEBUG("context inherited through fork() reopened in the child");
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
  // A failed read keeps the table it had (tried again on the next call):
  // taken as empty, a QP's modify to RTR failed with EINVAL in a process
  // at its RLIMIT_NOFILE, the GID it named "not there".
  std::optional<PrivateVector<GidEntry>> read = try_read_gid_table();
  if (!read) return;
  gids = std::move(*read);
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

PrivateVector<GidEntry> Context::gid_table() {
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

Transport* Context::transport_for(const ibv_gid& dgid, uint32_t dst_qpn) {
  Transport* t = transport_for(dgid);
  if (t != local_transport || !host->service() || !remote_transport || gid_is_multicast(dgid)) return t;
  // (A process of ours in another network namespace is on another host:
  // the service of this one leased its slot number to whoever asked here.)
  const shm::Peer* owner = host->peers().get(host->qpn_owner(dst_qpn));
  const uint64_t ours = host->registry().proc(host->slot()).netns_ino;
  return owner && (!ours || owner->proc->netns_ino == ours) ? t : remote_transport;
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
