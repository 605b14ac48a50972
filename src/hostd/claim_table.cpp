#include "hostd/claim_table.h"

namespace sv::hostd {

ClaimTable::Result ClaimTable::claim(int owner, uint32_t uid, std::string_view key, uint32_t* holder) {
  std::string k(key);
  if (auto it = by_key_.find(k); it != by_key_.end()) {
    if (it->second.owner == owner) return Result::kGranted;
    if (holder) *holder = it->second.uid;
    return Result::kHeld;
  }
  auto& mine = by_owner_[owner];
  size_t& of_uid = per_uid_[uid];
  if (mine.size() >= limits_.per_connection || of_uid >= limits_.per_uid || by_key_.size() >= limits_.total) {
    if (mine.empty()) by_owner_.erase(owner);
    if (of_uid == 0) per_uid_.erase(uid);
    return Result::kOverLimit;
  }
  mine.insert(k);
  by_key_.emplace(std::move(k), Holder{owner, uid});
  ++of_uid;
  return Result::kGranted;
}

void ClaimTable::release(int owner, std::string_view key) {
  auto it = by_key_.find(std::string(key));
  if (it == by_key_.end() || it->second.owner != owner) return;
  const uint32_t uid = it->second.uid;
  if (auto o = by_owner_.find(owner); o != by_owner_.end()) {
    o->second.erase(it->first);
    if (o->second.empty()) by_owner_.erase(o);
  }
  if (auto u = per_uid_.find(uid); u != per_uid_.end() && --u->second == 0) per_uid_.erase(u);
  by_key_.erase(it);
}

void ClaimTable::drop(int owner) {
  auto o = by_owner_.find(owner);
  if (o == by_owner_.end()) return;
  for (const std::string& k : o->second) {
    auto it = by_key_.find(k);
    if (it == by_key_.end()) continue;
    if (auto u = per_uid_.find(it->second.uid); u != per_uid_.end() && --u->second == 0) per_uid_.erase(u);
    by_key_.erase(it);
  }
  by_owner_.erase(o);
}

int ClaimTable::owner_of(std::string_view key) const {
  auto it = by_key_.find(std::string(key));
  return it == by_key_.end() ? -1 : it->second.owner;
}

size_t ClaimTable::count_of(int owner) const {
  auto o = by_owner_.find(owner);
  return o == by_owner_.end() ? 0 : o->second.size();
}

size_t ClaimTable::count_of_uid(uint32_t uid) const {
  auto u = per_uid_.find(uid);
  return u == per_uid_.end() ? 0 : u->second;
}

}  // namespace sv::hostd
