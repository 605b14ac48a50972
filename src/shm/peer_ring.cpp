#include "shm/peer_ring.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <cstring>

namespace sv::shm {
namespace {

constexpr size_t align8(size_t n) { return (n + 7) & ~size_t{7}; }

// Maps a ring file of the service's making: it must be exactly that size
// (the service sealed it: no one can shrink it under us).
void* map_ring(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != kPeerRingFileBytes) return nullptr;
  void* p = mmap(nullptr, kPeerRingFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

bool PeerRingWriter::map(int fd) {
  void* p = map_ring(fd);
  if (!p) return false;
  hdr_ = static_cast<PeerRingHeader*>(p);
  data_ = static_cast<uint8_t*>(p) + 4096;
  produced_ = hdr_->produced.load(std::memory_order_acquire);  // (0 in a new ring)
  return true;
}

void PeerRingWriter::unmap() {
  if (hdr_) munmap(hdr_, kPeerRingFileBytes);
  hdr_ = nullptr;
  data_ = nullptr;
}

bool PeerRingWriter::put(const PeerRecord& r, const uint8_t* data) {
  if (!hdr_ || r.len > kPeerRecordMaxData) return false;
  const uint64_t consumed = hdr_->consumed.load(std::memory_order_acquire);
  if (consumed > produced_ || produced_ - consumed > kPeerRingBytes) return false;  // a consumer that lies
  uint64_t pos = produced_ + appended_;
  size_t off = pos % kPeerRingBytes;
  const size_t total = align8(sizeof r + r.len), to_end = kPeerRingBytes - off;
  const size_t need = total > to_end ? to_end + total : total;
  if (pos + need - consumed > kPeerRingBytes) return false;  // no room: lost, as on a full wire
  if (total > to_end) {  // records do not wrap: the rest of the area is skipped
    if (to_end >= sizeof(PeerRecord)) {
      PeerRecord skip;
      skip.flags = kPeerRecordWrap;
      std::memcpy(data_ + off, &skip, sizeof skip);
    }
    pos += to_end;
    off = 0;
  }
  std::memcpy(data_ + off, &r, sizeof r);
  std::memcpy(data_ + off + sizeof r, data, r.len);
  appended_ = pos + total - produced_;
  return true;
}

bool PeerRingWriter::publish() {
  if (!appended_) return false;
  const uint64_t before = produced_;
  produced_ += appended_;
  appended_ = 0;
  hdr_->produced.store(produced_, std::memory_order_release);
  // (Against the consumer's release-then-look: one of us sees the other.)
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return hdr_->consumed.load(std::memory_order_acquire) == before;
}

bool PeerRingReader::map(int fd) {
  void* p = map_ring(fd);
  if (!p) return false;
  hdr_ = static_cast<PeerRingHeader*>(p);
  data_ = static_cast<const uint8_t*>(p) + 4096;
  consumed_ = seen_ = hdr_->consumed.load(std::memory_order_acquire);
  return true;
}

void PeerRingReader::unmap() {
  if (hdr_) munmap(hdr_, kPeerRingFileBytes);
  hdr_ = nullptr;
  data_ = nullptr;
}

ssize_t PeerRingReader::take(PeerRecord* r, uint8_t* out) {
  if (!hdr_ || broken_) return -1;
  for (;;) {
    if (consumed_ == seen_) {
      const uint64_t p = hdr_->produced.load(std::memory_order_acquire);
      if (p == consumed_) return -1;
      if (p < consumed_ || p - consumed_ > kPeerRingBytes) {
        broken_ = true;
        return -1;
      }
      seen_ = p;
    }
    const size_t off = consumed_ % kPeerRingBytes, to_end = kPeerRingBytes - off;
    PeerRecord h;
    if (to_end >= sizeof h) std::memcpy(&h, data_ + off, sizeof h);  // (read once)
    if (to_end < sizeof h || (h.flags & kPeerRecordWrap)) {
      consumed_ += to_end;
      if (consumed_ > seen_) {
        broken_ = true;
        return -1;
      }
      continue;
    }
    const size_t total = align8(sizeof h + h.len);
    if (h.len > kPeerRecordMaxData || total > to_end || consumed_ + total > seen_) {
      broken_ = true;
      return -1;
    }
    std::memcpy(out, data_ + off + sizeof h, h.len);
    *r = h;
    consumed_ += total;
    return h.len;
  }
}

}  // namespace sv::shm
