// rsockets: the bookkeeping of a stream connection's buffers and credits,
// free of any verbs call so that it can be tested alone
// (tests/rdmacm/rsocket_ring_test.cpp). The connection (rsocket_stream.cpp)
// owns one of each and calls them under its state lock.
#pragma once

#include <algorithm>
#include <cstdint>

#include "rsocket_wire.h"

namespace sv::rdmacm::rs {

// A ring of `size` bytes filled at `tail` and drained, in the same order,
// from the oldest bytes: the local send staging buffer (bytes in flight
// until their send completes). A piece never wraps; when little room is
// left before the end and more at the start, the end is skipped and
// accounted to the piece, so that it comes back with that piece.
class StagingRing {
 public:
  struct Span {
    uint32_t offset = 0;
    uint32_t length = 0;     // usable bytes at offset
    uint32_t accounted = 0;  // what release() must be given for this piece
  };

  explicit StagingRing(uint32_t size = 0) : size_(size) {}

  uint32_t size() const { return size_; }
  uint32_t used() const { return used_; }
  uint32_t free() const { return size_ - used_; }
  // The longest piece (at most `want`) that take() would hand out.
  uint32_t available(uint32_t want) const { return plan(want).length; }
  // Takes up to `want` bytes in one piece (length 0: none free).
  Span take(uint32_t want) {
    Span s = plan(want);
    if (!s.length) return s;
    used_ += s.accounted;
    tail_ = s.offset + s.length;
    if (tail_ == size_) tail_ = 0;
    return s;
  }
  // The oldest piece is done with (its `accounted`).
  void release(uint32_t n) {
    used_ -= std::min(n, used_);
    if (used_ == 0) tail_ = 0;  // empty: start again at the beginning
  }

 private:
  Span plan(uint32_t want) const {
    const uint32_t free_bytes = size_ - used_;
    if (!free_bytes || !want) return {};
    const uint32_t to_end = size_ - tail_;
    const uint32_t at_tail = std::min(to_end, free_bytes);
    if (at_tail >= want) return {tail_, want, want};
    // Free bytes at the start (the free region wraps past the end).
    const uint32_t at_start = free_bytes > to_end ? free_bytes - to_end : 0;
    if (at_start > at_tail) {
      uint32_t n = std::min(want, at_start);
      return {0, n, to_end + n};
    }
    return {tail_, at_tail, at_tail};
  }

  uint32_t size_;
  uint32_t tail_ = 0;
  uint32_t used_ = 0;
};

// The sender's view of the peer's receive ring: where the next bytes go and
// how many bytes the peer has granted.
class RemoteRing {
 public:
  RemoteRing() = default;
  RemoteRing(uint32_t size, uint32_t credit) : size_(size), credit_(credit) {}

  uint32_t credit() const { return credit_; }
  uint32_t offset() const { return offset_; }
  // Bytes that may be written at offset() now, in one piece.
  uint32_t writable() const { return std::min(credit_, size_ - offset_); }
  void advance(uint32_t n) {
    credit_ -= n;
    offset_ += n;
    if (offset_ == size_) offset_ = 0;
  }
  void grant(uint32_t n) { credit_ = std::min(size_, credit_ + n); }

 private:
  uint32_t size_ = 0;
  uint32_t offset_ = 0;
  uint32_t credit_ = 0;
};

// Our receive ring: bytes arrive behind each other (the sender splits at
// the end) and are read from `head`.
class ReceiveRing {
 public:
  explicit ReceiveRing(uint32_t size = 0) : size_(size) {}

  uint32_t size() const { return size_; }
  uint32_t head() const { return head_; }
  uint32_t readable() const { return readable_; }
  uint32_t contiguous_readable() const { return std::min(readable_, size_ - head_); }
  // False when the sender wrote more than fits (a protocol violation).
  bool arrived(uint32_t n) {
    if (n > size_ - readable_) return false;
    readable_ += n;
    return true;
  }
  void consume(uint32_t n) {
    head_ += n;
    if (head_ >= size_) head_ -= size_;
    readable_ -= n;
  }

 private:
  uint32_t size_;
  uint32_t head_ = 0;
  uint32_t readable_ = 0;
};

// The sender's message credits: receive WRs the peer has posted for us.
// Data leaves a reserve so that control messages (credit grants, shutdown)
// can always be sent.
class MessageCredits {
 public:
  static constexpr uint32_t kCtrlReserve = 2;

  MessageCredits() = default;
  explicit MessageCredits(uint32_t n) : available_(n) {}

  uint32_t available() const { return available_; }
  bool can_send_data() const { return available_ > kCtrlReserve; }
  bool can_send_ctrl() const { return available_ > 0; }
  void spend() { --available_; }
  void grant(uint32_t n) { available_ += n; }

 private:
  uint32_t available_ = 0;
};

// What the receiver owes the sender: receive WRs reposted and ring bytes
// read since the last grant. A grant is due once either reaches half of
// what the sender started with, so a sender never waits for credit that is
// sitting here (it runs dry only when half of its credit is unread data or
// in flight).
class GrantLedger {
 public:
  GrantLedger() = default;
  GrantLedger(uint32_t messages_total, uint32_t bytes_total)
      : message_threshold_(std::max(1u, messages_total / 2)),
        byte_threshold_(std::max(1u, bytes_total / 2)) {}

  void message_reposted() { ++messages_; }
  void bytes_read(uint32_t n) { bytes_ += n; }
  uint32_t pending_messages() const { return messages_; }
  uint32_t pending_bytes() const { return bytes_; }
  bool due() const { return messages_ >= message_threshold_ || bytes_ >= byte_threshold_; }
  // The next grant to send (fits one immediate); commit() once it is posted.
  CreditGrant next() const {
    return CreditGrant{std::min(messages_, CreditGrant::kMaxMessages),
                       std::min(bytes_, CreditGrant::kMaxBytes)};
  }
  void commit(const CreditGrant& g) {
    messages_ -= g.messages;
    bytes_ -= g.bytes;
  }

 private:
  uint32_t message_threshold_ = 1;
  uint32_t byte_threshold_ = 1;
  uint32_t messages_ = 0;
  uint32_t bytes_ = 0;
};

}  // namespace sv::rdmacm::rs
