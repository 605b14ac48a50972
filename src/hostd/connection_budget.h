// How many connections the host service takes, and from whom. Each costs
// it a file descriptor: at its file limit it could take no more, and one
// user opening connections in a loop would lock everyone else out (1100
// connections from one user once left every new RDMA process of the host,
// root's too, waiting in connect()). So the service counts connections per
// uid: the whole is bounded by what its file limit leaves, and no uid may
// hold more than its fair share of that: half of it, and no more than an
// equal share when other users are connected too. A connection over the
// budget is told why and closed, at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>

namespace sv::hostd {

class ConnectionBudget {
 public:
  // At most `capacity` connections at once (at least 2).
  explicit ConnectionBudget(size_t capacity) : capacity_(capacity < 2 ? 2 : capacity) {}

  // Counts a connection of `uid` if the budget allows it.
  bool admit(uint32_t uid);
  // A connection of `uid` closed.
  void leave(uint32_t uid);

  // How many connections `uid` may hold now.
  size_t share_of(uint32_t uid) const;
  size_t held_by(uint32_t uid) const;
  size_t total() const { return total_; }
  size_t capacity() const { return capacity_; }

 private:
  size_t capacity_;
  size_t total_ = 0;
  std::unordered_map<uint32_t, size_t> per_uid_;
};

}  // namespace sv::hostd
