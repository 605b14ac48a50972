#include "util/range_counts.h"

#include <iterator>

namespace sv {

void RangeCounts::split_at(uint64_t at) {
  auto it = segs_.upper_bound(at);
  if (it == segs_.begin()) return;
  --it;
  if (it->first == at || it->second.end <= at) return;
  segs_.emplace_hint(std::next(it), at, Segment{it->second.end, it->second.count});
  it->second.end = at;
}

void RangeCounts::merge_at(uint64_t at) {
  auto right = segs_.find(at);
  if (right == segs_.end() || right == segs_.begin()) return;
  auto left = std::prev(right);
  if (left->second.end != at || left->second.count != right->second.count) return;
  left->second.end = right->second.end;
  segs_.erase(right);
}

void RangeCounts::add(uint64_t start, uint64_t end) {
  if (start >= end) return;
  split_at(start);
  split_at(end);
  // Raise the segments inside, fill the gaps between them with new ones.
  uint64_t at = start;
  auto it = segs_.lower_bound(start);
  while (at < end) {
    if (it == segs_.end() || it->first >= end) {
      segs_.emplace_hint(it, at, Segment{end, 1});
      break;
    }
    if (it->first > at) segs_.emplace_hint(it, at, Segment{it->first, 1});
    ++it->second.count;
    at = it->second.end;
    ++it;
  }
  // Inside, neighbours differed before and still do (both raised, or a new
  // 1 beside a raised one): only the ends may now match what lies outside.
  merge_at(end);
  merge_at(start);
}

bool RangeCounts::covered_whole(uint64_t start, uint64_t end) const {
  auto it = segs_.upper_bound(start);
  if (it == segs_.begin()) return false;
  --it;
  for (uint64_t at = start; at < end; ++it) {
    if (it == segs_.end() || it->first > at || it->second.end <= at) return false;
    at = it->second.end;
  }
  return true;
}

void RangeCounts::remove(uint64_t start, uint64_t end) {
  if (start >= end || !covered_whole(start, end)) return;
  split_at(start);
  split_at(end);
  for (auto it = segs_.lower_bound(start); it != segs_.end() && it->first < end;)
    it = --it->second.count ? std::next(it) : segs_.erase(it);
  merge_at(end);
  merge_at(start);
}

bool RangeCounts::overlaps(uint64_t start, uint64_t end) const {
  if (start >= end) return false;
  auto it = segs_.upper_bound(start);
  if (it != segs_.begin() && std::prev(it)->second.end > start) return true;
  return it != segs_.end() && it->first < end;
}

uint32_t RangeCounts::count_at(uint64_t addr) const {
  auto it = segs_.upper_bound(addr);
  if (it == segs_.begin()) return 0;
  --it;
  return it->second.end > addr ? it->second.count : 0;
}

}  // namespace sv
