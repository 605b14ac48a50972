#include "shm/overlay.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "shm/arena.h"
#include "util/bits.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/proc_maps.h"
#include "util/unhooked_mapping.h"
#include "util/vma_query.h"

namespace sv::shm {
namespace {

constexpr uint64_t kPage = 4096;

bool overlayable(const MapEntry& e) {
  if (e.shared || !e.read) return false;
  if (e.path == "[stack]" || e.path == "[vvar]" || e.path == "[vdso]" || e.path == "[vsyscall]") return false;
  if (e.path.find("anon_hugepage") != std::string::npos || e.path.find("hugepages") != std::string::npos)
    return false;
  return true;
}

int prot_of(const MapEntry& e) {
  return (e.read ? PROT_READ : 0) | (e.write ? PROT_WRITE : 0) | (e.exec ? PROT_EXEC : 0);
}

// Overlays work on whole pages, so these read bytes of other allocations
// that share a page with the registered buffer, live or freed (and, under
// ASan, their redzones): that is the point, not an overflow or a use after
// free. They are kept out of the sanitizers and out of memcpy (which ASan
// intercepts).
#define SV_RAW_MEMORY \
  __attribute__((no_sanitize("address", "thread"), optimize("no-tree-loop-distribute-patterns")))

SV_RAW_MEMORY bool page_is_zero(const uint8_t* p) {
  const auto* w = reinterpret_cast<const volatile uint64_t*>(p);
  for (size_t i = 0; i < kPage / 8; ++i)
    if (w[i]) return false;
  return true;
}

SV_RAW_MEMORY void copy_pages(uint8_t* dst, const uint8_t* src, uint64_t len) {
  auto* d = reinterpret_cast<volatile uint64_t*>(dst);
  const auto* s = reinterpret_cast<const volatile uint64_t*>(src);
  for (uint64_t i = 0; i < len / 8; ++i) d[i] = s[i];
}

// The first of `maps` (sorted by address, as both /proc/self/maps and
// mappings_over give them) that ends after `addr`: a binary search, as an
// extent's pages are looked up among every mapping of the process.
std::vector<MapEntry>::const_iterator first_ending_after(const std::vector<MapEntry>& maps, uint64_t addr) {
  return std::upper_bound(maps.begin(), maps.end(), addr, [](uint64_t a, const MapEntry& e) { return a < e.end; });
}

// True when [start, end) is mapped from our arena at the expected offsets.
bool still_ours(const std::vector<MapEntry>& maps, uint64_t ino, uint64_t start, uint64_t end,
                uint64_t arena_off) {
  uint64_t at = start;
  for (auto it = first_ending_after(maps, start); it != maps.end() && at < end; ++it) {
    const MapEntry& e = *it;
    if (e.start > at || e.inode != ino || !e.shared) return false;
    if (e.offset + (at - e.start) != arena_off + (at - start)) return false;
    at = e.end;
  }
  return at >= end;
}

// True when some page of [start, end) is still mapped from the arena at the
// offset the extent gave it.
bool any_page_ours(const std::vector<MapEntry>& maps, uint64_t ino, uint64_t start, uint64_t end,
                   uint64_t arena_off) {
  for (auto it = first_ending_after(maps, start); it != maps.end() && it->start < end; ++it) {
    const MapEntry& e = *it;
    if (e.inode != ino || !e.shared) continue;
    uint64_t s = std::max(start, e.start);
    if (e.offset + (s - e.start) == arena_off + (s - start)) return true;
  }
  return false;
}

// The pages of an anonymous private mapping it never had (neither in
// memory nor swapped out, says /proc/self/pagemap: bits 63 and 62) read as
// zeros. Reading one to find that out faults it in (the zero page), ~15 us
// a page on a VM with shadow page tables: a receive buffer fresh from
// malloc, which nobody has written yet (Open MPI's MPI_Sendrecv_replace,
// a collective's scratch space), spent half of its registration there
// (4 of ~8 ms for 1 MiB). Reads the entries in chunks into a buffer of its
// own (no allocation: nothing may write the pages being overlaid).
class NeverHadPages {
 public:
  // `src`: the first page; `anonymous`: whether a page the mapping never
  // had is zeros (not a file's bytes). The file is opened per overlay: an
  // earlier process's descriptor would show that process's pages to a
  // fork()ed child.
  SV_RAW_MEMORY NeverHadPages(uint64_t src, bool anonymous) : first_page_(src / kPage) {
    if (anonymous) fd_ = static_cast<int>(syscall(SYS_openat, AT_FDCWD, "/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
  }
  SV_RAW_MEMORY ~NeverHadPages() {
    if (fd_ >= 0) syscall(SYS_close, fd_);
  }
  NeverHadPages(const NeverHadPages&) = delete;
  NeverHadPages& operator=(const NeverHadPages&) = delete;

  // Whether page `i` (from `src`) is one the mapping never had; false when
  // that cannot be known.
  SV_RAW_MEMORY bool operator()(uint64_t i) {
    if (fd_ < 0) return false;
    if (i < chunk_ || i >= chunk_ + count_) {
      const long got = syscall(SYS_pread64, fd_, entries_, sizeof entries_, (first_page_ + i) * sizeof(uint64_t));
      if (got < static_cast<long>(sizeof(uint64_t))) {
        syscall(SYS_close, fd_);
        fd_ = -1;
        return false;
      }
      chunk_ = i;
      count_ = static_cast<uint64_t>(got) / sizeof(uint64_t);
    }
    constexpr uint64_t kPresent = 1ull << 63, kSwapped = 1ull << 62;
    return (entries_[i - chunk_] & (kPresent | kSwapped)) == 0;
  }

 private:
  uint64_t first_page_;
  int fd_ = -1;
  uint64_t chunk_ = 0, count_ = 0;  // entries_ holds pages [chunk_, chunk_ + count_)
  uint64_t entries_[256];
};

// Copies the pages of [src, src+len) into the arena file at `off`, skipping
// pages of zeros (the file's holes read as zeros already), and, in an
// anonymous mapping, without reading those it never had. Through the
// file, not through our mapping of the arena: writing a page of that
// mapping first faults it in, and a fault costs more than the rest of a
// 4 KiB registration together on a machine with shadow page tables (26 us
// of ~90 in this project's VM). A raw system call, which no sanitizer
// intercepts: the bytes of neighbouring allocations it reads are meant.
// False when the file refused a write; the caller copies through the
// mapping then.
SV_RAW_MEMORY bool write_pages_to_file(int fd, uint64_t off, uint64_t src, uint64_t len, bool anonymous) {
  NeverHadPages never_had(src, anonymous);
  auto zeros = [&](uint64_t p) { return never_had(p / kPage) || page_is_zero(reinterpret_cast<const uint8_t*>(src + p)); };
  for (uint64_t p = 0; p < len;) {
    if (zeros(p)) {
      p += kPage;
      continue;
    }
    uint64_t run = kPage;  // the pages with data from here on, in one write
    while (p + run < len && !zeros(p + run)) run += kPage;
    for (uint64_t done = 0; done < run;) {
      long n = syscall(SYS_pwrite64, fd, src + p + done, run - done, off + p + done);
      if (n <= 0) return false;
      done += static_cast<uint64_t>(n);
    }
    p += run;
  }
  return true;
}

// How much an extent outgrows what was swept last before the next sweep
// (collect_all_unmapped): the greater of the amounts, so the sweeps' cost
// per registration stays constant while dead overlays hold at most about as
// much memory again as the live ones.
constexpr uint64_t kSweepMinExtents = 64;
constexpr uint64_t kSweepMinBytes = 16ull << 20;

}  // namespace

void OverlayMap::release_extent(PrivateMap<uint64_t, Extent>::iterator it, uint64_t now) {
  arena_.overlay_space().release(it->second.arena_off, it->second.len, now);
  extent_bytes_ -= it->second.len;
  extents_.erase(it);
}

void OverlayMap::collect_unmapped_meeting(uint64_t a, uint64_t b, uint64_t now) {
  auto it = extents_.upper_bound(a);
  if (it != extents_.begin() && std::prev(it)->first + std::prev(it)->second.len > a) --it;
  while (it != extents_.end() && it->first < b) {
    const uint64_t page = it->first;
    const Extent& x = it->second;
    if (x.pins == 0 &&
        !any_page_ours(mappings_over(page, page + x.len, false), arena_.inode(), page, page + x.len, x.arena_off)) {
      auto next = std::next(it);
      release_extent(it, now);
      it = next;
    } else {
      ++it;
    }
  }
}

void OverlayMap::collect_all_unmapped(uint64_t now) {
  // One read of the whole file, not a query per extent: a sweep looks at
  // every extent, and the file has at most one line per extent besides the
  // process's other mappings (adjacent overlays merge into one).
  std::vector<MapEntry> maps = read_proc_maps();
  for (auto it = extents_.begin(); it != extents_.end();) {
    const Extent& x = it->second;
    if (x.pins == 0 && !any_page_ours(maps, arena_.inode(), it->first, it->first + x.len, x.arena_off)) {
      // The application unmapped (or replaced) all of this memory: its pages
      // in the arena are garbage now. Give them back. (A partly unmapped
      // extent is kept until the rest goes too.)
      auto next = std::next(it);
      release_extent(it, now);
      it = next;
    } else {
      ++it;
    }
  }
  swept_extents_ = extents_.size();
  swept_bytes_ = extent_bytes_;
  new_extents_ = new_bytes_ = 0;
}

void OverlayMap::sweep_if_due(uint64_t now) {
  if (new_extents_ >= std::max(kSweepMinExtents, swept_extents_) || new_bytes_ >= std::max(kSweepMinBytes, swept_bytes_))
    collect_all_unmapped(now);
}

std::optional<OverlayMap::Pin> OverlayMap::pin(uint64_t addr, uint64_t len) {
  std::lock_guard g(arena_.overlay_mutex());
  const uint64_t a = align_down(addr, kPage), b = align_up(addr + len, kPage);
  const uint64_t now = monotonic_ns();
  // Overlays the application unmapped are found where they matter, without
  // looking at every extent on every registration (that made 65535
  // registrations O(n^2)): those this range meets, now, since the
  // application may have mapped new memory where one was; all of them, now
  // and then (sweep_if_due), for the memory they hold.
  collect_unmapped_meeting(a, b, now);
  arena_.overlay_space().reclaim(now, [this](uint64_t off, uint64_t len) { arena_.discard(off, len); });
  const std::vector<MapEntry> maps = mappings_over(a, b);

  // Reuse an overlay that already covers the range.
  auto it = extents_.upper_bound(a);
  if (it != extents_.begin()) {
    auto prev = std::prev(it);
    if (prev->first <= a && prev->first + prev->second.len >= b &&
        still_ours(maps, arena_.inode(), a, b, prev->second.arena_off + (a - prev->first))) {
      ++prev->second.pins;
      return Pin{prev->first, prev->second.arena_off};
    }
    // Partial overlap with an existing overlay: moving those pages again would
    // strand peers that use them, so this registration takes the slower path.
    if (prev->first + prev->second.len > a) return std::nullopt;
  }
  if (it != extents_.end() && it->first < b) return std::nullopt;
  // Pages a live direct registration reaches: they may be written right now.
  if (direct_.overlaps(a, b)) return std::nullopt;

  // Every page must sit in an overlayable private mapping, and not in the
  // mapping of this thread's own stack (a thread's stack is anonymous memory
  // like any other, but this very function writes to it between the copy
  // and the remap, and those writes would be lost: buffers on a thread's
  // stack take the cross-memory-attach path).
  const auto stack_here = reinterpret_cast<uint64_t>(__builtin_frame_address(0));
  std::vector<const MapEntry*> pieces;
  uint64_t at = a;
  for (const MapEntry& e : maps) {
    if (e.end <= at || e.start >= b) continue;
    if (e.start > at || !overlayable(e)) return std::nullopt;
    if (e.start <= stack_here && stack_here < e.end) return std::nullopt;
    pieces.push_back(&e);
    at = e.end;
    if (at >= b) break;
  }
  if (at < b) return std::nullopt;

  sweep_if_due(now);
  uint64_t off = arena_.overlay_space().allocate(b - a);
  if (!off) {
    collect_all_unmapped(now);
    off = arena_.overlay_space().allocate(b - a);
  }
  if (!off) {
    SV_INFO("overlay region full: registration of %lu bytes uses cross-memory attach", b - a);
    return std::nullopt;
  }
  PrivateVector<Piece> done;
  for (const MapEntry* e : pieces) {
    uint64_t s = std::max(a, e->start), t = std::min(b, e->end);
    // (A private file mapping's pages it never had are the file's bytes.)
    done.push_back(Piece{s, t - s, prot_of(*e), e->inode == 0 && (e->path.empty() || e->path == "[heap]")});
  }
  // From the copy to the last remap nothing may write these pages, not even
  // this function: no allocation or free (malloc's own metadata may live in
  // them, and a write to the old page after the copy would be lost), and no
  // memory hook of the application's (the remap goes past libc's mmap).
  bool written = true;
  for (const Piece& piece : done)
    written = written && write_pages_to_file(arena_.fd(), off + (piece.start - a), piece.start, piece.len, piece.anonymous);
  if (!written) {
    uint8_t* dst = arena_.base() + off;
    for (uint64_t p = a; p < b; p += kPage) {
      const uint8_t* src = reinterpret_cast<const uint8_t*>(p);
      if (!page_is_zero(src)) copy_pages(dst + (p - a), src, kPage);
    }
  }
  int failed_errno = 0;
  uint64_t failed_at = 0;
  for (const Piece& piece : done) {
    void* r = unhooked_mmap(reinterpret_cast<void*>(piece.start), piece.len, piece.prot, MAP_SHARED | MAP_FIXED,
                            arena_.fd(), static_cast<off_t>(off + (piece.start - a)));
    if (r == MAP_FAILED) {
      failed_errno = errno;
      failed_at = piece.start;
      break;
    }
  }
  extents_.emplace(a, Extent{off, b - a, 1, std::move(done)});  // (a sweep may have moved `it`)
  extent_bytes_ += b - a;
  ++new_extents_;
  new_bytes_ += b - a;
  if (failed_errno) {
    // The pieces already remapped hold identical bytes, so the application
    // is unaffected. The extent keeps one pin forever: its pages back live
    // application memory and must never be discarded.
    SV_WARN("overlay remap of %#lx failed: %s", failed_at, strerror(failed_errno));
    return std::nullopt;
  }
  SV_DEBUG("overlaid %lu bytes at %#lx (arena offset %#lx)", b - a, a, off);
  return Pin{a, off};
}

void OverlayMap::unpin(uint64_t page) {
  std::lock_guard g(arena_.overlay_mutex());
  auto it = extents_.find(page);
  if (it != extents_.end() && it->second.pins) --it->second.pins;
}

namespace {

// The pages under [addr, addr+len), saturating: the implicit on-demand MR
// covers the whole address space.
std::pair<uint64_t, uint64_t> page_span(uint64_t addr, uint64_t len) {
  const uint64_t end = len > UINT64_MAX - addr ? UINT64_MAX : addr + len;
  return {align_down(addr, kPage), end > UINT64_MAX - kPage ? UINT64_MAX : align_up(end, kPage)};
}

}  // namespace

void OverlayMap::hold_direct(uint64_t addr, uint64_t len) {
  std::lock_guard g(arena_.overlay_mutex());
  auto [a, b] = page_span(addr, len);
  direct_.add(a, b);
}

void OverlayMap::release_direct(uint64_t addr, uint64_t len) {
  std::lock_guard g(arena_.overlay_mutex());
  auto [a, b] = page_span(addr, len);
  direct_.remove(a, b);
}

namespace {

// What a fork child must restore, in memory of its own (not the heap).
struct ForkPiece {
  uint64_t start, len;
  int prot;
  void* snapshot;
};
struct ForkPlan {
  uint64_t bytes;  // of this mapping
  uint64_t count;
  ForkPiece pieces[];
};
ForkPlan* g_fork_plan = nullptr;

}  // namespace

void OverlayMap::prepare_fork() {
  arena_.overlay_mutex().lock();
  uint64_t count = 0;
  for (auto& [page, x] : extents_) count += x.pieces.size();
  uint64_t bytes = align_up(sizeof(ForkPlan) + count * sizeof(ForkPiece), kPage);
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return;  // the child then shares these pages, as before fork() copied pinned pages
  auto* plan = static_cast<ForkPlan*>(m);
  plan->bytes = bytes;
  plan->count = 0;
  {
    // Only pages still mapped from the arena: the application may have
    // unmapped (or replaced) some since they were registered. The list of
    // mappings lives on the heap, and the heap may be overlaid itself, so it
    // is gone before the first snapshot: a malloc or free after a snapshot
    // of the page it touches would leave the child with a torn heap.
    std::vector<MapEntry> maps = read_proc_maps();
    for (auto& [page, x] : extents_)
      for (const Piece& p : x.pieces)
        if (still_ours(maps, arena_.inode(), p.start, p.start + p.len, x.arena_off + (p.start - page)))
          plan->pieces[plan->count++] = ForkPiece{p.start, p.len, p.prot, nullptr};
  }
  // From here on: system calls and copies only, no allocation.
  uint64_t kept = 0;
  for (uint64_t i = 0; i < plan->count; ++i) {
    ForkPiece p = plan->pieces[i];
    void* snap = mmap(nullptr, p.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (snap == MAP_FAILED) continue;
    if (p.prot & PROT_READ)
      copy_pages(static_cast<uint8_t*>(snap), reinterpret_cast<const uint8_t*>(p.start), p.len);
    madvise(reinterpret_cast<void*>(p.start), p.len, MADV_DONTFORK);
    p.snapshot = snap;
    plan->pieces[kept++] = p;
  }
  plan->count = kept;
  g_fork_plan = plan;
}

void OverlayMap::parent_after_fork() {
  if (ForkPlan* plan = g_fork_plan) {
    for (uint64_t i = 0; i < plan->count; ++i) {
      const ForkPiece& p = plan->pieces[i];
      madvise(reinterpret_cast<void*>(p.start), p.len, MADV_DOFORK);
      munmap(p.snapshot, p.len);
    }
    g_fork_plan = nullptr;
    munmap(plan, plan->bytes);
  }
  arena_.overlay_mutex().unlock();
}

void restore_overlays_in_fork_child() {
  // Only system calls here: this runs in the child of a possibly
  // multi-threaded parent, before anything else. The remap goes past libc's
  // mremap, whose hooks would write state of the application's to pages the
  // snapshot then replaces.
  ForkPlan* plan = g_fork_plan;
  if (!plan) return;
  for (uint64_t i = 0; i < plan->count; ++i) {
    const ForkPiece& p = plan->pieces[i];
    auto* at = reinterpret_cast<void*>(p.start);
    if (unhooked_mremap_fixed(p.snapshot, p.len, p.len, at) != MAP_FAILED) mprotect(at, p.len, p.prot);
  }
  g_fork_plan = nullptr;
  munmap(plan, plan->bytes);
}

}  // namespace sv::shm
