// The rings between two users' processes (shm/peer_ring.h): what goes in
// comes out in order, across the end of the data area; a full ring refuses;
// and a side that lies (a position that cannot be, a record longer than the
// ring) makes the other stop reading, never read or write outside the ring.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "shm/peer_ring.h"

namespace sv::shm {
namespace {

// A ring file as the host service makes one.
int ring_file() {
  const int fd = memfd_create("test-ring", MFD_CLOEXEC);
  if (fd >= 0 && ftruncate(fd, kPeerRingFileBytes) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

PeerRecord record(uint32_t len, uint16_t port) {
  PeerRecord r;
  r.len = len;
  r.src_port = port;
  r.src.s6_addr[15] = 1;
  return r;
}

struct Ring {
  int fd = ring_file();
  PeerRingWriter w;
  PeerRingReader r;
  std::vector<uint8_t> out = std::vector<uint8_t>(kPeerRecordMaxData);
  Ring() {
    EXPECT_TRUE(w.map(fd));
    EXPECT_TRUE(r.map(fd));
  }
  ~Ring() { close(fd); }
  // The header, as the other side could write it.
  PeerRingHeader* header() {
    return static_cast<PeerRingHeader*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  }
};

TEST(PeerRing, DatagramsComeOutInOrderAcrossTheEnd) {
  Ring ring;
  std::vector<uint8_t> data(1100);
  uint32_t next_in = 0, next_out = 0;
  // Enough to go round the 4 MiB area several times, in batches.
  for (int round = 0; round < 40; ++round) {
    for (int i = 0; i < 300; ++i, ++next_in) {
      std::memset(data.data(), static_cast<int>(next_in & 0xff), data.size());
      const uint32_t len = 900 + next_in % 200;
      ASSERT_TRUE(ring.w.put(record(len, static_cast<uint16_t>(next_in)), data.data()));
    }
    const bool was_empty = ring.w.publish();
    EXPECT_TRUE(was_empty);  // (we took everything each round)
    ASSERT_TRUE(ring.r.ready());
    PeerRecord got;
    ssize_t n;
    while ((n = ring.r.take(&got, ring.out.data())) >= 0) {
      ASSERT_EQ(got.src_port, static_cast<uint16_t>(next_out));
      ASSERT_EQ(n, 900 + next_out % 200);
      ASSERT_EQ(ring.out[0], next_out & 0xff);
      ASSERT_EQ(ring.out[n - 1], next_out & 0xff);
      ++next_out;
    }
    ring.r.release();
  }
  EXPECT_EQ(next_out, next_in);
  EXPECT_FALSE(ring.r.broken());
}

TEST(PeerRing, AFullRingRefusesUntilTheReaderReleases) {
  Ring ring;
  std::vector<uint8_t> data(kPeerRecordMaxData);
  int put = 0;
  while (ring.w.put(record(kPeerRecordMaxData, 0), data.data())) ++put;
  EXPECT_EQ(put, static_cast<int>(kPeerRingBytes / (kPeerRecordMaxData + sizeof(PeerRecord))));
  ring.w.publish();
  PeerRecord got;
  ASSERT_GE(ring.r.take(&got, ring.out.data()), 0);
  EXPECT_FALSE(ring.w.put(record(kPeerRecordMaxData, 0), data.data()));  // not yet released
  ring.r.release();
  EXPECT_TRUE(ring.w.put(record(1000, 0), data.data()));
}

TEST(PeerRing, APositionThatCannotBeStopsTheReader) {
  Ring ring;
  PeerRingHeader* h = ring.header();
  h->produced.store(kPeerRingBytes + 8);  // more than the ring holds
  PeerRecord got;
  EXPECT_EQ(ring.r.take(&got, ring.out.data()), -1);
  EXPECT_TRUE(ring.r.broken());
  EXPECT_FALSE(ring.r.ready());
  munmap(h, 4096);
}

TEST(PeerRing, ARecordLongerThanWhatWasPublishedStopsTheReader) {
  Ring ring;
  std::vector<uint8_t> data(100);
  ASSERT_TRUE(ring.w.put(record(100, 1), data.data()));
  ring.w.publish();
  // The producer rewrites the record's length after publishing it.
  auto* area = static_cast<uint8_t*>(mmap(nullptr, kPeerRingFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, ring.fd, 0));
  const uint32_t huge = 60000;
  std::memcpy(area + 4096, &huge, sizeof huge);
  PeerRecord got;
  EXPECT_EQ(ring.r.take(&got, ring.out.data()), -1);
  EXPECT_TRUE(ring.r.broken());
  munmap(area, kPeerRingFileBytes);
}

TEST(PeerRing, AConsumerThatLiesOnlyStopsItsOwnTraffic) {
  Ring ring;
  PeerRingHeader* h = ring.header();
  h->consumed.store(uint64_t{1} << 40);  // beyond anything produced
  std::vector<uint8_t> data(100);
  EXPECT_FALSE(ring.w.put(record(100, 1), data.data()));
  munmap(h, 4096);
}

TEST(PeerRing, AFileOfAnotherSizeIsNotMapped) {
  const int fd = memfd_create("test-ring", MFD_CLOEXEC);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  PeerRingReader r;
  PeerRingWriter w;
  EXPECT_FALSE(r.map(fd));
  EXPECT_FALSE(w.map(fd));
  close(fd);
}

}  // namespace
}  // namespace sv::shm
