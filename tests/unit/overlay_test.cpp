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
#include "util/proc_maps.h"

namespace sv::shm {
namespace {

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
