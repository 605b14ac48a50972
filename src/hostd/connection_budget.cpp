#include "hostd/connection_budget.h"

#include <algorithm>

namespace sv::hostd {

size_t ConnectionBudget::share_of(uint32_t uid) const {
  // The users connected now, counting `uid` whether or not it is yet.
  const size_t users = per_uid_.size() + (per_uid_.count(uid) ? 0 : 1);
  return std::max<size_t>(1, std::min(capacity_ / 2, capacity_ / users));
}

size_t ConnectionBudget::held_by(uint32_t uid) const {
  auto it = per_uid_.find(uid);
  return it == per_uid_.end() ? 0 : it->second;
}

bool ConnectionBudget::admit(uint32_t uid) {
  if (total_ >= capacity_ || held_by(uid) >= share_of(uid)) return false;
  ++per_uid_[uid];
  ++total_;
  return true;
}

void ConnectionBudget::leave(uint32_t uid) {
  auto it = per_uid_.find(uid);
  if (it == per_uid_.end()) return;
  if (--it->second == 0) per_uid_.erase(it);
  --total_;
}

}  // namespace sv::hostd
