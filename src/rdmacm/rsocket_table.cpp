// rsockets: the table of rsockets by socket number, process-wide defaults
// (/etc/rdma/rsocket, as rdma-core reads them), and RSocket's lifetime.
#include <fcntl.h>
#include <time.h>

#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "rsocket_state.h"
#include "util/private_heap.h"

namespace sv::rdmacm::rs {
namespace {

std::mutex& table_mutex() {
  static auto* m = new_private<std::mutex>();
  return *m;
}

PrivateUnorderedMap<int, std::shared_ptr<RSocket>>& table() {
  static auto* t = new_private<PrivateUnorderedMap<int, std::shared_ptr<RSocket>>>();
  return *t;
}

bool read_config(const char* name, uint32_t* value) {
  char path[128];
  std::snprintf(path, sizeof path, "/etc/rdma/rsocket/%s", name);
  FILE* f = std::fopen(path, "r");
  if (!f) return false;
  unsigned long v = 0;
  bool ok = std::fscanf(f, "%lu", &v) == 1;
  std::fclose(f);
  if (ok) *value = static_cast<uint32_t>(v);
  return ok;
}

Defaults load_defaults() {
  Defaults d;
  read_config("polling_time", &d.polling_time_us);
  read_config("inline_default", &d.options.inline_size);
  read_config("sqsize_default", &d.options.sq_size);
  read_config("rqsize_default", &d.options.rq_size);
  read_config("mem_default", &d.options.rbuf_size);
  read_config("wmem_default", &d.options.sbuf_size);
  read_config("iomap_size", &d.options.iomap_slots);
  return d;
}

}  // namespace

RSocket::RSocket() : opt(defaults().options) {}
RSocket::~RSocket() = default;

bool RSocket::nonblocking(int msg_flags) const {
  return (fd_flags & O_NONBLOCK) || (msg_flags & MSG_DONTWAIT);
}

IomapEntry* RSocket::iomap_table() const {
  return rbuf ? reinterpret_cast<IomapEntry*>(rbuf + ring.size()) : nullptr;
}

std::shared_ptr<RSocket> lookup(int fd) {
  std::lock_guard<std::mutex> guard(table_mutex());
  auto it = table().find(fd);
  return it == table().end() ? nullptr : it->second;
}

void table_insert(const std::shared_ptr<RSocket>& rs) {
  std::lock_guard<std::mutex> guard(table_mutex());
  table()[rs->fd] = rs;
}

void table_remove(int fd) {
  std::shared_ptr<RSocket> doomed;  // destroyed outside the table lock
  std::lock_guard<std::mutex> guard(table_mutex());
  auto it = table().find(fd);
  if (it == table().end()) return;
  doomed = std::move(it->second);
  table().erase(it);
}

const Defaults& defaults() {
  static const Defaults d = load_defaults();
  return d;
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

}  // namespace sv::rdmacm::rs
