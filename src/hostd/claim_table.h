// The CM mailbox claims the host service holds (util/host_service_socket.h
// kClaim): which connection a mailbox key belongs to, so that CM MADs for
// it go to that user alone. Every operation costs the same however many
// claims there are (one user's 65536 claims used to make each claim scan
// them all: seconds of the service's time, while other users' CM messages
// waited), and no connection or uid holds more than its limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace sv::hostd {

class ClaimTable {
 public:
  struct Limits {
    size_t per_connection = 65536;  // a CM's listeners and connections
    size_t per_uid = 131072;        // over all of one user's processes
    size_t total = 1 << 20;         // what the service remembers at most
  };
  enum class Result { kGranted, kHeld, kOverLimit };

  ClaimTable() = default;
  explicit ClaimTable(Limits limits) : limits_(limits) {}

  // Claims `key` for connection `owner` of user `uid`. kHeld: another
  // connection has it (its uid in *holder); claiming one's own key again
  // is granted.
  Result claim(int owner, uint32_t uid, std::string_view key, uint32_t* holder = nullptr);
  // Lets `key` go if `owner` holds it.
  void release(int owner, std::string_view key);
  // Lets every claim of `owner` go (its connection closed).
  void drop(int owner);
  // The connection holding `key`, or -1.
  int owner_of(std::string_view key) const;
  size_t count_of(int owner) const;
  size_t count_of_uid(uint32_t uid) const;
  size_t size() const { return by_key_.size(); }
  // fn(key, owner, uid) for each claim.
  template <typename Fn>
  void for_each(Fn fn) const {
    for (const auto& [key, h] : by_key_) fn(key, h.owner, h.uid);
  }

 private:
  struct Holder {
    int owner;
    uint32_t uid;
  };
  Limits limits_;
  std::unordered_map<std::string, Holder> by_key_;
  std::unordered_map<int, std::unordered_set<std::string>> by_owner_;
  std::unordered_map<uint32_t, size_t> per_uid_;
};

}  // namespace sv::hostd
