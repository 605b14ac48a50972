// How many holders cover each address: ranges [start, end) added and
// removed in any order, overlapping or nested, kept as disjoint segments
// each with its count. "Does anything hold an address of [a, b)?" is one
// lookup, O(log segments), where a list of the ranges would be walked whole.
//
// The overlay map (shm/overlay.h) keeps its live direct registrations here:
// every ibv_reg_mr asks whether its pages are held, and 65535 registrations
// asked it of each other (O(n^2)).
#pragma once

#include <cstdint>

#include "util/private_heap.h"

namespace sv {

class RangeCounts {
 public:
  // One more holder of [start, end). Empty ranges are ignored.
  void add(uint64_t start, uint64_t end);
  // Undoes one add(start, end). A range not held whole is left alone.
  void remove(uint64_t start, uint64_t end);
  // Whether some address of [start, end) is held.
  bool overlaps(uint64_t start, uint64_t end) const;
  // Holders of `addr` (for tests).
  uint32_t count_at(uint64_t addr) const;
  // Disjoint segments kept: neighbours with equal counts are merged, so
  // this stays at most twice the number of ranges held.
  size_t segments() const { return segs_.size(); }

 private:
  struct Segment {
    uint64_t end;
    uint32_t count;
  };
  // A segment boundary at `at`: the segment across it is cut in two.
  void split_at(uint64_t at);
  // Joins the segments on either side of `at` when their counts agree.
  void merge_at(uint64_t at);
  bool covered_whole(uint64_t start, uint64_t end) const;

  PrivateMap<uint64_t, Segment> segs_;  // start -> segment; no zero counts
};

}  // namespace sv
