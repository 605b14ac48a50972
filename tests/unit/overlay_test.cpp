// Registered-memory overlays: the application's bytes stay where they are
// and keep their values, and become reachable through the arena.
#include "sanitizers.h"
#include "shm/overlay.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "shm/host.h"
#include "anonymous_pages.h"
#include "util/proc_maps.h"
#include "util/vma_query.h"

namespace sv::shm {
namespace {

constexpr uint64_t kPage = 4096;

bool mapped_from_arena(Host& host, uint64_t addr) {
  for (const MapEntry& e : read_proc_maps())
    if (e.start <= addr && addr < e.end) return e.inode == host.arena().inode() && e.shared;
  return false;
}

TEST(Overlay, HeapBufferKeepsItsBytesAndNeighbours) {
  Host* host = Host::get();
  ASSERT_NE(host, nullptr);
  std::vector<char*> blocks;
  for (int i = 0; i < 64; ++i) {
    blocks.push_back(static_cast<char*>(std::malloc(100)));
    std::memset(blocks.back(), 'a' + i % 26, 100);
  }
  char* target = blocks[32];
  auto pin = host->overlays().pin(reinterpret_cast<uint64_t>(target), 100);
  ASSERT_TRUE(pin.has_value());
  EXPECT_TRUE(mapped_from_arena(*host, reinterpret_cast<uint64_t>(target)));
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 100; ++j) ASSERT_EQ(blocks[i][j], 'a' + i % 26) << i;
  // The arena alias and the application's address are the same bytes.
  char* alias = reinterpret_cast<char*>(host->arena().base() + pin->arena_off +
                                        (reinterpret_cast<uint64_t>(target) - pin->page));
  alias[5] = '!';
  EXPECT_EQ(target[5], '!');
  target[6] = '?';
  EXPECT_EQ(alias[6], '?');
  // malloc still works on these pages.
  for (char* b : blocks) std::free(b);
  for (int i = 0; i < 64; ++i) std::free(std::malloc(100));
  host->overlays().unpin(pin->page);
}

TEST(Overlay, ContainedRangeReusesTheExtentAndPartialOverlapFallsBack) {
  Host* host = Host::get();
  ASSERT_NE(host, nullptr);
  void* mem = mmap(nullptr, 5 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto base = reinterpret_cast<uint64_t>(mem);
  auto whole = host->overlays().pin(base, 3 * 4096);
  ASSERT_TRUE(whole);
  auto inner = host->overlays().pin(base + 4096 + 10, 100);
  ASSERT_TRUE(inner);
  EXPECT_EQ(inner->page, whole->page);
  EXPECT_EQ(inner->arena_off, whole->arena_off);
  EXPECT_FALSE(host->overlays().pin(base + 2 * 4096, 2 * 4096));  // straddles the extent's end
  host->overlays().unpin(inner->page);
  host->overlays().unpin(whole->page);
  munmap(mem, 5 * 4096);
}

// A page that a live direct registration (cross-memory attach, bounce, ODP)
// reaches is never overlaid by a later registration: its writers (a peer's
// process_vm_writev, our network thread placing a READ response) may write
// it between the copy and the remap, and that write would be lost. Open MPI
// over openib between two hosts got the tail of a READ as zeros so (about
// one run in seven) when it registered the next segment of the buffer over
// the READ's last page.
TEST(Overlay, PagesOfALiveDirectRegistrationAreNotOverlaid) {
  Host* host = Host::get();
  ASSERT_NE(host, nullptr);
  void* mem = mmap(nullptr, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto base = reinterpret_cast<uint64_t>(mem);
  // A registration of bytes 100 .. 2 pages + 50, reached directly.
  host->overlays().hold_direct(base + 100, 2 * 4096 - 50);
  EXPECT_FALSE(host->overlays().pin(base + 2 * 4096, 100)) << "its last page";
  EXPECT_FALSE(host->overlays().pin(base, 10)) << "its first page, other bytes";
  auto beyond = host->overlays().pin(base + 3 * 4096, 100);
  EXPECT_TRUE(beyond) << "a page it does not reach";
  host->overlays().release_direct(base + 100, 2 * 4096 - 50);
  auto after = host->overlays().pin(base + 2 * 4096, 100);
  EXPECT_TRUE(after) << "once deregistered, its pages may be overlaid";
  if (beyond) host->overlays().unpin(beyond->page);
  if (after) host->overlays().unpin(after->page);
  // The implicit on-demand MR reaches the whole address space.
  host->overlays().hold_direct(0, UINT64_MAX);
  EXPECT_FALSE(host->overlays().pin(base + 4096, 100));
  host->overlays().release_direct(0, UINT64_MAX);
  munmap(mem, 4 * 4096);
}

TEST(Overlay, SharedMappingsAreNotOverlaid) {
  Host* host = Host::get();
  ASSERT_NE(host, nullptr);
  void* mem = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  EXPECT_FALSE(host->overlays().pin(reinterpret_cast<uint64_t>(mem), 4096));
  munmap(mem, 4096);
}

// Registration learns of the application's munmap and mmap between two
// registrations from the kernel at each one (util/vma_query.h), not from
// what it saw before.
TEST(Overlay, MunmapInTheMiddleOfARegisteredRange) {
  Host* host = Host::get();
  ASSERT_NE(host, nullptr);
  const uint64_t base = svtest::map_anonymous_pages(4);
  std::memset(reinterpret_cast<void*>(base), 'm', 4 * kPage);
  auto whole = host->overlays().pin(base, 4 * kPage);
  ASSERT_TRUE(whole);
  host->overlays().unpin(whole->page);  // deregistered
  ASSERT_EQ(munmap(reinterpret_cast<void*>(base + kPage), kPage), 0);
  // What is left of it is still the same overlay.
  auto first = host->overlays().pin(base, 100);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->arena_off, whole->arena_off);
  host->overlays().unpin(first->page);
  EXPECT_FALSE(host->overlays().pin(base, 3 * kPage)) << "a range over the hole is not mapped";
  // New memory in the hole: the extent still backs the pages beside it, so
  // the hole cannot be overlaid anew (a documented limit); the registration
  // takes the slower path.
  ASSERT_NE(mmap(reinterpret_cast<void*>(base + kPage), kPage, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
            MAP_FAILED);
  EXPECT_FALSE(host->overlays().pin(base + kPage, 100));
  // Once all of it is gone, memory mapped there again is overlaid afresh.
  ASSERT_EQ(munmap(reinterpret_cast<void*>(base), 4 * kPage), 0);
  ASSERT_NE(mmap(reinterpret_cast<void*>(base), 4 * kPage, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
            MAP_FAILED);
  std::memset(reinterpret_cast<void*>(base + 2 * kPage), 'n', kPage);
  auto again = host->overlays().pin(base + 2 * kPage, kPage);
  ASSERT_TRUE(again);
  EXPECT_TRUE(mapped_from_arena(*host, base + 2 * kPage));
  EXPECT_EQ(reinterpret_cast<volatile char*>(base + 2 * kPage)[17], 'n');
  host->overlays().unpin(again->page);
  munmap(reinterpret_cast<void*>(base), 4 * kPage);
}

TEST(Overlay, RemapOfTheSameAddressWithADifferentFile) {
  Host* host = Host::get();
  ASSERT_NE(host, nullptr);
  const uint64_t base = svtest::map_anonymous_pages(1);
  auto pin = host->overlays().pin(base, kPage);
  ASSERT_TRUE(pin);
  host->overlays().unpin(pin->page);
  // The application puts a file of its own, shared, where the buffer was.
  int fd = memfd_create("overlay-test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, kPage), 0);
  ASSERT_EQ(pwrite(fd, "file", 4, 0), 4);
  ASSERT_NE(mmap(reinterpret_cast<void*>(base), kPage, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0),
            MAP_FAILED);
  EXPECT_FALSE(host->overlays().pin(base, kPage)) << "a shared mapping is never overlaid";
  EXPECT_FALSE(mapped_from_arena(*host, base));
  reinterpret_cast<volatile char*>(base)[0] = 'F';  // still the file's page
  char b = 0;
  ASSERT_EQ(pread(fd, &b, 1, 0), 1);
  EXPECT_EQ(b, 'F');
  // The same with a private mapping of the file: overlaid anew, its bytes kept.
  ASSERT_NE(mmap(reinterpret_cast<void*>(base), kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, 0),
            MAP_FAILED);
  auto fresh = host->overlays().pin(base, kPage);
  ASSERT_TRUE(fresh);
  EXPECT_NE(fresh->arena_off, pin->arena_off) << "the old overlay's pages belonged to memory now gone";
  EXPECT_EQ(std::memcmp(reinterpret_cast<const void*>(base), "File", 4), 0);
  host->overlays().unpin(fresh->page);
  munmap(reinterpret_cast<void*>(base), kPage);
  close(fd);
}

// Pages of an anonymous mapping that it never had are not read to learn
// they are zeros (overlay.cpp, NeverHadPages); the pages it has keep their
// bytes, whichever way the copy learnt which is which: written ones, one
// only read (the zero page), one given back (MADV_DONTNEED).
TEST(Overlay, PagesNeverTouchedReadAsZerosAndTheRestKeepTheirBytes) {
  Host* host = Host::get();
  ASSERT_NE(host, nullptr);
  constexpr uint64_t kPages = 600;  // (more than one read of pagemap's entries)
  const uint64_t base = svtest::map_anonymous_pages(kPages);
  auto* bytes = reinterpret_cast<volatile uint8_t*>(base);
  auto written = [](uint64_t page) { return page % 7 == 1 || page == 257 || page == 599; };
  for (uint64_t p = 0; p < kPages; ++p)
    if (written(p)) bytes[p * kPage + p % kPage] = static_cast<uint8_t>(1 + p % 255);
  (void)bytes[3 * kPage];  // read: the zero page
  bytes[9 * kPage] = 0xee;  // written, then given back
  ASSERT_EQ(madvise(reinterpret_cast<void*>(base + 9 * kPage), kPage, MADV_DONTNEED), 0);
  auto pin = host->overlays().pin(base, kPages * kPage);
  ASSERT_TRUE(pin.has_value());
  EXPECT_TRUE(mapped_from_arena(*host, base));
  const auto* alias = host->arena().base() + pin->arena_off;
  for (uint64_t p = 0; p < kPages; ++p)
    for (uint64_t at : {uint64_t{0}, p % kPage, kPage - 1}) {
      const uint8_t want = written(p) && at == p % kPage ? static_cast<uint8_t>(1 + p % 255) : 0;
      ASSERT_EQ(bytes[p * kPage + at], want) << "page " << p << " byte " << at;
      ASSERT_EQ(alias[p * kPage + at], want) << "page " << p << " byte " << at << ", through the arena";
    }
  host->overlays().unpin(pin->page);
  munmap(reinterpret_cast<void*>(base), kPages * kPage);
}

TEST(Overlay, AdjacentMappingsKeepTheirProtections) {
  Host* host = Host::get();
  ASSERT_NE(host, nullptr);
  const uint64_t base = svtest::map_anonymous_pages(3);
  std::memset(reinterpret_cast<void*>(base), 'p', 3 * kPage);
  ASSERT_EQ(mprotect(reinterpret_cast<void*>(base + kPage), kPage, PROT_READ), 0);
  auto pin = host->overlays().pin(base + 100, 3 * kPage - 200);
  ASSERT_TRUE(pin);
  for (uint64_t p = 0; p < 3; ++p) EXPECT_TRUE(mapped_from_arena(*host, base + p * kPage)) << p;
  auto now = mappings_over(base, base + 3 * kPage);
  ASSERT_EQ(now.size(), 3u);
  EXPECT_TRUE(now[0].write);
  EXPECT_FALSE(now[1].write);
  EXPECT_TRUE(now[2].write);
  for (uint64_t i = 0; i < 3 * kPage; i += 511) ASSERT_EQ(reinterpret_cast<volatile char*>(base)[i], 'p') << i;
  host->overlays().unpin(pin->page);
  munmap(reinterpret_cast<void*>(base), 3 * kPage);
}

// Many registrations, each of its own page: each is found again, none
// overlaps another, and one in the middle still takes its own pages.
TEST(Overlay, ThousandsOfSinglePageRegistrations) {
  Host* host = Host::get();
  ASSERT_NE(host, nullptr);
  constexpr uint64_t kCount = 2000;
  const uint64_t base = svtest::map_anonymous_pages(kCount);
  std::vector<OverlayMap::Pin> pins;
  for (uint64_t i = 0; i < kCount; ++i) {
    reinterpret_cast<volatile uint64_t*>(base + i * kPage)[0] = i;
    auto p = host->overlays().pin(base + i * kPage, kPage);
    ASSERT_TRUE(p) << i;
    pins.push_back(*p);
  }
  for (uint64_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(pins[i].page, base + i * kPage);
    ASSERT_EQ(*reinterpret_cast<volatile uint64_t*>(host->arena().base() + pins[i].arena_off), i);
  }
  for (const auto& p : pins) host->overlays().unpin(p.page);
  munmap(reinterpret_cast<void*>(base), kCount * kPage);
}

TEST(Overlay, ForkChildGetsAPrivateCopy) {
  SV_SKIP_IF_FORK_UNSUPPORTED();
  Host* host = Host::get();
  ASSERT_NE(host, nullptr);
  void* mem = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* bytes = static_cast<volatile char*>(mem);
  bytes[0] = 'p';
  auto pin = host->overlays().pin(reinterpret_cast<uint64_t>(mem), 4096);
  ASSERT_TRUE(pin);
  pid_t child = fork();
  if (child == 0) {
    // The child sees the parent's bytes, and its writes stay its own.
    int ok = bytes[0] == 'p';
    bytes[0] = 'c';
    _exit(ok ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(bytes[0], 'p');
  host->overlays().unpin(pin->page);
}

}  // namespace
}  // namespace sv::shm
