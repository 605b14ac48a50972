// Makes registered memory reachable by peers with plain loads and stores.
//
// At registration the pages under [addr, addr+len) are copied into the arena
// memfd and the same file pages are mapped back over the original addresses
// (MAP_SHARED|MAP_FIXED, original protections). The application keeps using
// its memory as before; peers that map the arena now see the same bytes.
// This is what XPMEM does in the kernel, done from user space.
//
// Rules and limits (docs/ARCHITECTURE.md, "Registered memory"):
//  * only private mappings are overlaid (anonymous, heap, private file
//    mappings); shared mappings, hugetlb pages and special regions are not,
//    and their MRs fall back to cross-memory attach;
//  * another thread must not write those pages while they are being
//    registered (the copy and the remap are not atomic);
//  * a peer can reach the whole page, not only the registered bytes;
//  * a registration that partly overlaps an existing overlay falls back too;
//  * so does one over pages of a live registration that is not overlaid
//    (hold_direct): peers and our own network thread may be writing those
//    pages through it, and a write between the copy and the remap is lost.
//
// Cost: a registration asks the kernel about its own range only
// (util/vma_query.h), looks up its neighbours among the extents and the
// direct registrations (ordered maps), and copies through the arena file.
// Overlays the application unmapped are found where a registration meets
// them, and all of them in a sweep once the extents doubled: 65535
// registrations of 4 KiB, each read /proc/self/maps and walked every
// extent before (39-60 s, from 210 to 970-1490 us each), take 1.7-5 s
// with the machine's load (26-80 us each, flat), most of it the remap's
// TLB flush.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>
#include "util/private_heap.h"
#include "util/range_counts.h"

namespace sv::shm {

class Arena;

class OverlayMap {
 public:
  explicit OverlayMap(Arena& arena) : arena_(arena) {}

  struct Pin {
    uint64_t page;       // page-aligned address the overlay starts at
    uint64_t arena_off;  // arena offset mapped at `page`
  };
  // Overlays (or reuses the overlay of) the pages under [addr, addr+len) and
  // pins it. nullopt when the range cannot be overlaid.
  std::optional<Pin> pin(uint64_t addr, uint64_t len);
  void unpin(uint64_t page);

  // A live registration of [addr, addr+len) that is reached some other way
  // (cross-memory attach, the bounce service, on-demand paging): no overlay
  // may take its pages while it lives, since writers go through it at any
  // time (a peer's process_vm_writev; our network thread placing a READ
  // response or a WRITE). Open MPI registered the next segment of a buffer
  // over the page that held the tail of a READ then in flight, and that
  // tail arrived as zeros (one run in seven, between two hosts).
  void hold_direct(uint64_t addr, uint64_t len);
  void release_direct(uint64_t addr, uint64_t len);

  // fork() support, from pthread_atfork handlers. The child must not share
  // overlaid pages with the parent (they are MAP_SHARED): it gets private
  // copies made at fork time, as the kernel copies pinned pages at fork.
  // Before the fork the pages are copied into private anonymous memory
  // (which fork duplicates) and kept out of the child (MADV_DONTFORK); the
  // child moves the copies into place (restore_overlays_in_fork_child), the
  // parent drops them.
  void prepare_fork();
  void parent_after_fork();

 private:
  struct Piece {
    uint64_t start, len;
    int prot;
    bool anonymous;  // a page the mapping never had reads as zeros
  };
  struct Extent {
    uint64_t arena_off;
    uint64_t len;
    uint32_t pins;
    PrivateVector<Piece> pieces;  // original protections, to restore in a fork child
  };
  using Extents = PrivateMap<uint64_t, Extent>;
  void release_extent(Extents::iterator it, uint64_t now);
  // Extents meeting [a, b) whose memory the application unmapped, every page
  // of it, are given back (asked of the kernel per extent).
  void collect_unmapped_meeting(uint64_t a, uint64_t b, uint64_t now);
  // The same for every extent, against one read of /proc/self/maps.
  void collect_all_unmapped(uint64_t now);
  // collect_all_unmapped once the extents made since the last one outnumber
  // (or outweigh) those it left: constant cost per registration.
  void sweep_if_due(uint64_t now);

  Arena& arena_;
  Extents extents_;  // page -> extent; extents never overlap
  uint64_t extent_bytes_ = 0;
  uint64_t swept_extents_ = 0, swept_bytes_ = 0;  // what the last sweep left
  uint64_t new_extents_ = 0, new_bytes_ = 0;      // made since
  RangeCounts direct_;  // pages of live direct registrations
};

// First thing in a fork child: puts the fork-time copies of overlaid pages in
// place. It reads nothing but its plan, which lives in its own mapping: the
// heap (our objects included) may sit on the very pages being restored.
void restore_overlays_in_fork_child();

}  // namespace sv::shm
