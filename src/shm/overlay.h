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
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>
#include "util/private_heap.h"

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
  };
  struct Extent {
    uint64_t arena_off;
    uint64_t len;
    uint32_t pins;
    PrivateVector<Piece> pieces;  // original protections, to restore in a fork child
  };
  void collect_unmapped_extents();

  Arena& arena_;
  PrivateMap<uint64_t, Extent> extents_;  // page -> extent
  std::multimap<uint64_t, uint64_t> direct_;  // first page -> end page of live direct registrations
};

// First thing in a fork child: puts the fork-time copies of overlaid pages in
// place. It reads nothing but its plan, which lives in its own mapping: the
// heap (our objects included) may sit on the very pages being restored.
void restore_overlays_in_fork_child();

}  // namespace sv::shm
