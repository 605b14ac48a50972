#include "core/handles.h"

#include <map>
#include <mutex>
#include <utility>
#include "util/private_heap.h"

namespace sv::handles {
namespace {

struct Entry {
  void* owner;
  uint64_t serial;
};

struct Table : PrivateHeapObject {
  std::mutex mu;
  PrivateMap<std::pair<Kind, uint32_t>, Entry> live;
  uint64_t next_serial = 1;
};

Table& table() {
  static Table* t = new Table;  // outlives static destructors: objects may too
  return *t;
}

}  // namespace

uint64_t publish(Kind kind, uint32_t handle, void* owner) {
  Table& t = table();
  std::lock_guard g(t.mu);
  uint64_t serial = t.next_serial++;
  t.live[{kind, handle}] = Entry{owner, serial};
  return serial;
}

void* retire(Kind kind, uint32_t handle, uint64_t serial) {
  Table& t = table();
  std::lock_guard g(t.mu);
  auto it = t.live.find({kind, handle});
  if (it == t.live.end() || it->second.serial != serial) return nullptr;
  void* owner = it->second.owner;
  t.live.erase(it);
  return owner;
}

bool visit(Kind kind, uint32_t handle, const std::function<void(void* owner, uint64_t serial)>& copy) {
  Table& t = table();
  std::lock_guard g(t.mu);
  auto it = t.live.find({kind, handle});
  if (it == t.live.end()) return false;
  copy(it->second.owner, it->second.serial);
  return true;
}

}  // namespace sv::handles
