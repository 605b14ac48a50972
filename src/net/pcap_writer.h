// A capture file of the frames a transport sends and receives, in the
// classic libpcap format (LINKTYPE_ETHERNET, microsecond timestamps) that
// tshark and Wireshark open directly. Thread-safe: several engines may
// append to one file. A failed write is reported and ends the capture; it
// never throws or aborts, since tracing must not take the datapath down.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace sv::net {

class PcapWriter {
 public:
  static constexpr uint32_t kDefaultSnaplen = 65535;

  PcapWriter() = default;
  ~PcapWriter();
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;

  // Creates (or truncates) `path` and writes the file header. Frames longer
  // than `snaplen` are stored cut, with their original length recorded.
  bool open(const std::string& path, uint32_t snaplen = kDefaultSnaplen);
  // Appends one frame. False if the file is not open or the write failed;
  // after a failure the file is closed (its last record may be partial).
  bool write(const uint8_t* frame, size_t len,
             std::chrono::system_clock::time_point when = std::chrono::system_clock::now());
  // Flushes and closes; false if that failed. Safe to call twice.
  bool close();

  bool is_open() const;
  // Why the last open/write/close failed ("" if none did).
  std::string last_error() const;

 private:
  bool fail_locked(const char* what);

  mutable std::mutex mu_;
  std::FILE* file_ = nullptr;
  uint32_t snaplen_ = kDefaultSnaplen;
  std::string path_;
  std::string error_;
};

}  // namespace sv::net
