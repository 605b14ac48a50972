// A one-way ring of RoCEv2 datagrams between two processes of one host
// that belong to different users, set up by the host service
// (hostd::ChannelOpen): a shared memory file of its making that both map.
// Datagrams between two users then move through memory, not through the
// kernel's UDP stack (two copies and a system call per batch there), and
// the receiver still handles each as one from the wire: it checks every
// header and key itself (docs/ARCHITECTURE.md, "Security").
//
// Neither side trusts the other: each keeps its own position privately and
// only publishes it; the other's published position is read once, and
// checked, before use; a record's length is read once and bounded. What a
// misbehaving peer can do is send garbage (as it could on a wire) or stop
// the ring (then datagrams are lost, as on a wire), never make the other
// side read or write outside the ring.
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <sys/types.h>

#include "util/private_heap.h"

namespace sv::shm {

struct alignas(64) PeerRingHeader {
  alignas(64) std::atomic<uint64_t> produced;  // bytes the producer published (grows for ever)
  alignas(64) std::atomic<uint64_t> consumed;  // bytes the consumer is done with
};

inline constexpr size_t kPeerRingBytes = size_t{4} << 20;  // the data area: a window of 4096 1 KiB packets fits
inline constexpr size_t kPeerRingFileBytes = 4096 + kPeerRingBytes;
// The largest datagram a record carries (a GSO-sized one is cut apart first).
inline constexpr size_t kPeerRecordMaxData = 65536;

// Ahead of each datagram in the ring.
struct PeerRecord {
  uint32_t len = 0;  // the datagram's bytes that follow (from its BTH on)
  uint8_t flags = 0;
  uint8_t traffic_class = 0;
  uint16_t src_port = 0;
  in6_addr src{}, dst{};
};
static_assert(sizeof(PeerRecord) == 40);
inline constexpr uint8_t kPeerRecordWrap = 1;  // nothing more before the end of the data area

// The producer's side.
class PeerRingWriter : public PrivateHeapObject {
 public:
  // Maps the ring file `fd` (kPeerRingFileBytes, the service's); false on failure.
  bool map(int fd);
  void unmap();
  ~PeerRingWriter() { unmap(); }
  // Appends a datagram (not yet visible to the consumer): false when there
  // is no room (the consumer is behind, or broken): a lost packet.
  bool put(const PeerRecord& r, const uint8_t* data);
  // Makes what put() appended visible. True when the consumer had taken
  // everything before it (it may be asleep: ring its bell).
  bool publish();

 private:
  PeerRingHeader* hdr_ = nullptr;
  uint8_t* data_ = nullptr;
  uint64_t produced_ = 0;   // ours, and what we published
  uint64_t appended_ = 0;   // put() since, not yet published
};

// The consumer's side.
class PeerRingReader : public PrivateHeapObject {
 public:
  bool map(int fd);
  void unmap();
  ~PeerRingReader() { unmap(); }
  // Whether the producer published anything we have not taken (one load).
  bool ready() const { return hdr_ && !broken_ && hdr_->produced.load(std::memory_order_acquire) != consumed_; }
  // The next datagram, copied out (header into *r, bytes into `out`, which
  // holds kPeerRecordMaxData): its length, or -1 when none is ready or the
  // ring is broken (the producer published a position or a record that
  // cannot be: it is read no more).
  ssize_t take(PeerRecord* r, uint8_t* out);
  // Tells the producer what take() has freed. Then a look at ready() sees
  // what it published meanwhile, or it saw our release and rang the bell
  // (PeerRingWriter::publish).
  void release() {
    if (!hdr_) return;
    hdr_->consumed.store(consumed_, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  bool broken() const { return broken_; }

 private:
  PeerRingHeader* hdr_ = nullptr;
  const uint8_t* data_ = nullptr;
  uint64_t consumed_ = 0;
  uint64_t seen_ = 0;  // the producer's position, as last read and checked
  bool broken_ = false;
};

}  // namespace sv::shm
