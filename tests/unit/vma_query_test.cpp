// mappings_over: the kernel's answer for one range, current after every
// mmap, munmap and mprotect of the application, and the same as the whole
// of /proc/self/maps says for that range.
#include "util/vma_query.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "sanitizers.h"
#include "anonymous_pages.h"
#include "util/proc_maps.h"

namespace sv {
namespace {

constexpr uint64_t kPage = 4096;

void* at(uint64_t addr) { return reinterpret_cast<void*>(addr); }

// What the whole file says about [start, end).
std::vector<MapEntry> from_file(uint64_t start, uint64_t end) {
  std::vector<MapEntry> out;
  for (MapEntry& e : read_proc_maps())
    if (e.end > start && e.start < end) out.push_back(e);
  return out;
}

void expect_same(const std::vector<MapEntry>& got, const std::vector<MapEntry>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].start, want[i].start) << i;
    EXPECT_EQ(got[i].end, want[i].end) << i;
    EXPECT_EQ(got[i].read, want[i].read) << i;
    EXPECT_EQ(got[i].write, want[i].write) << i;
    EXPECT_EQ(got[i].exec, want[i].exec) << i;
    EXPECT_EQ(got[i].shared, want[i].shared) << i;
    EXPECT_EQ(got[i].offset, want[i].offset) << i;
    EXPECT_EQ(got[i].inode, want[i].inode) << i;
    EXPECT_EQ(got[i].path, want[i].path) << i;
  }
}

TEST(VmaQuery, AdjacentMappingsWithTheirOwnProtections) {
  // Between two PROT_NONE guards: the kernel would merge the outer pages
  // with neighbouring anonymous memory of the same protection.
  const uint64_t guarded = svtest::map_anonymous_pages(5), base = guarded + kPage;
  ASSERT_EQ(mprotect(at(guarded), kPage, PROT_NONE), 0);
  ASSERT_EQ(mprotect(at(guarded + 4 * kPage), kPage, PROT_NONE), 0);
  ASSERT_EQ(mprotect(at(base + kPage), kPage, PROT_READ), 0);
  auto got = mappings_over(base, base + 3 * kPage);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].start, base);
  EXPECT_TRUE(got[0].write);
  EXPECT_EQ(got[1].start, base + kPage);
  EXPECT_FALSE(got[1].write);
  EXPECT_TRUE(got[1].read);
  EXPECT_EQ(got[2].end, base + 3 * kPage);
  expect_same(got, from_file(base, base + 3 * kPage));
  // A range inside one mapping: that mapping, whole.
  auto inner = mappings_over(base + kPage + 10, base + kPage + 20);
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_EQ(inner[0].start, base + kPage);
  EXPECT_EQ(inner[0].end, base + 2 * kPage);
  munmap(at(guarded), 5 * kPage);
}

TEST(VmaQuery, UnmappedInTheMiddleIsAGap) {
  const uint64_t base = svtest::map_anonymous_pages(3);
  ASSERT_EQ(munmap(at(base + kPage), kPage), 0);
  auto got = mappings_over(base, base + 3 * kPage);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].end, base + kPage);
  EXPECT_EQ(got[1].start, base + 2 * kPage);
  expect_same(got, from_file(base, base + 3 * kPage));
  EXPECT_TRUE(mappings_over(base + kPage, base + 2 * kPage).empty());
  munmap(at(base), 3 * kPage);
  EXPECT_TRUE(mappings_over(base, base + 3 * kPage).empty()) << "an answer of now, not of before";
}

TEST(VmaQuery, RemappedWithAFileAtTheSameAddress) {
  const uint64_t base = svtest::map_anonymous_pages(2);
  auto before = mappings_over(base, base + kPage);
  ASSERT_EQ(before.size(), 1u);
  EXPECT_FALSE(before[0].shared);
  EXPECT_EQ(before[0].inode, 0u);
  int fd = memfd_create("vma-query-test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4 * kPage), 0);
  ASSERT_NE(mmap(at(base), kPage, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 2 * kPage), MAP_FAILED);
  auto after = mappings_over(base, base + 2 * kPage);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_TRUE(after[0].shared);
  EXPECT_NE(after[0].inode, 0u);
  EXPECT_EQ(after[0].offset, 2 * kPage);
  EXPECT_NE(after[0].path.find("memfd:vma-query-test"), std::string::npos) << after[0].path;
  EXPECT_FALSE(after[1].shared);
  expect_same(after, from_file(base, base + 2 * kPage));
  munmap(at(base), 2 * kPage);
  close(fd);
}

TEST(VmaQuery, NamesAndNoNames) {
  int local = 0;
  const auto here = reinterpret_cast<uint64_t>(&local);
  auto named = mappings_over(here, here + 1);
  ASSERT_EQ(named.size(), 1u);
  auto bare = mappings_over(here, here + 1, /*with_names=*/false);
  ASSERT_EQ(bare.size(), 1u);
  if (vma_query_available()) {
    EXPECT_TRUE(bare[0].path.empty()) << "(the fallback reads them all the same)";
  }
  expect_same(named, from_file(here, here + 1));
}

// A fork() child asks about its own memory, not its parent's (a descriptor
// of /proc/self/maps keeps describing the process that opened it).
TEST(VmaQuery, AForkChildSeesItsOwnMappings) {
  SV_SKIP_IF_FORK_UNSUPPORTED();
  const uint64_t base = svtest::map_anonymous_pages(1);
  ASSERT_EQ(mappings_over(base, base + kPage).size(), 1u);  // the parent's descriptor is open
  pid_t child = fork();
  if (child == 0) {
    munmap(at(base), kPage);
    _exit(mappings_over(base, base + kPage).empty() ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(mappings_over(base, base + kPage).size(), 1u);
  munmap(at(base), kPage);
}

}  // namespace
}  // namespace sv
