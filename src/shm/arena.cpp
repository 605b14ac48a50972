#include "shm/arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

#include "util/bits.h"
#include "util/clock.h"
#include "util/log.h"

namespace sv::shm {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kQuarantineNs = 2'000'000'000ull;  // see extent_allocator.h
constexpr uint64_t kHeapBegin = 16ull << 20;

}  // namespace

// The heap holds queues: at most a sixteenth of the arena, at most 4 GiB;
// the rest backs registered memory.
uint64_t overlay_begin_for(uint64_t size) {
  uint64_t end = std::min<uint64_t>(size / 16, 4ull << 30);
  return std::max<uint64_t>(end, kHeapBegin + (64ull << 20));
}

Arena* Arena::create(uint64_t size) {
  int fd = memfd_create("softverbs-arena", MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    int e = errno;
    ::close(fd);
    errno = e;
    return nullptr;
  }
  struct stat st;
  fstat(fd, &st);
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    ::close(fd);
    errno = e;
    return nullptr;
  }
  // A forked child must not scribble on our queues: it does not inherit them.
  madvise(p, size, MADV_DONTFORK);
  return new Arena(fd, st.st_ino, static_cast<uint8_t*>(p), size);
}

Arena::Arena(int fd, uint64_t ino, uint8_t* base, uint64_t size)
    : fd_(fd),
      ino_(ino),
      base_(base),
      size_(size),
      heap_(kHeapBegin, overlay_begin_for(size), 64, kQuarantineNs),
      overlay_space_(overlay_begin_for(size), size, kPage, kQuarantineNs) {
  if (getrandom(&key_seed_, sizeof key_seed_, GRND_NONBLOCK) != sizeof key_seed_)
    key_seed_ = monotonic_ns() ^ (uint64_t(getpid()) << 32);  // (no entropy yet: still not a fixed sequence)
  ArenaHeader* h = header();
  uint64_t off = kPage;
  auto place = [&](uint64_t bytes) {
    uint64_t at = off;
    off = align_up(off + bytes, kPage);
    return at;
  };
  h->qp_table = place(sizeof(QpSlotEntry) * kMaxQps);
  h->mr_table = place(sizeof(MrEntry) * kMaxMrs);
  h->srq_table = place(sizeof(SrqSlotEntry) * kMaxSrqs);
  h->doorbells = place(sizeof(DoorbellEntry) * kMaxDoorbells);
  h->contexts = place(sizeof(ContextShared) * kMaxContexts);
  h->bounce = place(sizeof(BounceShared));
  h->heap_begin = kHeapBegin;
  h->heap_end = overlay_begin_for(size);
  h->overlay_begin = h->heap_end;
  h->overlay_end = size;
  h->size = size;
  h->pid = getpid();
  h->version = kLayoutVersion;
  h->magic = kArenaMagic;
  if (off > kHeapBegin) SV_ERROR("arena tables overflow the heap start");
}

uint64_t Arena::alloc(uint64_t bytes) {
  std::lock_guard g(mu_);
  heap_.reclaim(monotonic_ns(), [this](uint64_t off, uint64_t len) { discard(off, len); });
  uint64_t off = heap_.allocate(bytes);
  // Blocks come back zeroed: discarded pages read as zero, and small blocks
  // are cleared here (they may share pages with live blocks).
  if (off) std::memset(base_ + off, 0, align_up(bytes, heap_.granule()));
  return off;
}

void Arena::free(uint64_t off, uint64_t bytes) {
  std::lock_guard g(mu_);
  heap_.release(off, bytes, monotonic_ns());
}

void Arena::discard(uint64_t off, uint64_t len) {
  uint64_t first = align_up(off, kPage), last = align_down(off + len, kPage);
  if (last > first)
    fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(first),
              static_cast<off_t>(last - first));
}

}  // namespace sv::shm
