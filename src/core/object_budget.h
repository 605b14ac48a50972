// How many objects of one kind the process holds, against the device
// profile's maximum (core/device_profile.h: max_qp, max_mr, ...). A
// profile file may set them below softverbs' own limits, and then a
// program meets the device's limit where it would on that device: the
// create call fails with ENOMEM, as a NIC's does when its table is full.
#pragma once

#include <atomic>
#include <cstdint>

namespace sv {

class ObjectBudget {
 public:
  // One more, if fewer than `max` are held.
  bool take(uint64_t max) {
    if (held_.fetch_add(1, std::memory_order_relaxed) < max) return true;
    held_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  void give() { held_.fetch_sub(1, std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> held_{0};
};

}  // namespace sv
