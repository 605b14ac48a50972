#include "pcap_writer.h"

#include <cerrno>
#include <cstring>

namespace sv::net {
namespace {

// https://wiki.wireshark.org/Development/LibpcapFileFormat: every field in
// the writer's byte order; the magic number tells readers which one it is.
constexpr uint32_t kMagicMicroseconds = 0xA1B2C3D4;
constexpr uint16_t kVersionMajor = 2, kVersionMinor = 4;
constexpr uint32_t kLinktypeEthernet = 1;

struct FileHeader {
  uint32_t magic, version, thiszone, sigfigs, snaplen, linktype;
};
struct RecordHeader {
  uint32_t ts_sec, ts_usec, incl_len, orig_len;
};
static_assert(sizeof(FileHeader) == 24 && sizeof(RecordHeader) == 16);

}  // namespace

PcapWriter::~PcapWriter() { close(); }

bool PcapWriter::open(const std::string& path, uint32_t snaplen) {
  std::lock_guard lock(mu_);
  if (file_) std::fclose(file_);
  error_.clear();
  path_ = path;
  snaplen_ = snaplen;
  file_ = std::fopen(path.c_str(), "wb");
  if (!file_) return fail_locked("open");
  // The version is two u16s: major first in memory, whatever the byte order.
  uint16_t version[2] = {kVersionMajor, kVersionMinor};
  FileHeader h{kMagicMicroseconds, 0, 0, 0, snaplen, kLinktypeEthernet};
  std::memcpy(&h.version, version, sizeof version);
  if (std::fwrite(&h, sizeof h, 1, file_) != 1 || std::fflush(file_) != 0) return fail_locked("write header");
  return true;
}

bool PcapWriter::write(const uint8_t* frame, size_t len, std::chrono::system_clock::time_point when) {
  using namespace std::chrono;
  std::lock_guard lock(mu_);
  if (!file_) {
    if (error_.empty()) error_ = "pcap: not open";
    return false;
  }
  auto usec = duration_cast<microseconds>(when.time_since_epoch()).count();
  uint32_t orig = len > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(len);
  uint32_t incl = orig < snaplen_ ? orig : snaplen_;
  RecordHeader r{static_cast<uint32_t>(usec / 1000000), static_cast<uint32_t>(usec % 1000000), incl, orig};
  // Flushed per frame so the file is readable while we run and complete
  // up to the last frame if the process dies.
  if (std::fwrite(&r, sizeof r, 1, file_) != 1 || (incl && std::fwrite(frame, incl, 1, file_) != 1) ||
      std::fflush(file_) != 0)
    return fail_locked("write");
  return true;
}

bool PcapWriter::close() {
  std::lock_guard lock(mu_);
  if (!file_) return true;
  bool ok = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!ok) error_ = "pcap: close " + path_ + ": " + std::strerror(errno);
  return ok;
}

bool PcapWriter::is_open() const {
  std::lock_guard lock(mu_);
  return file_ != nullptr;
}

std::string PcapWriter::last_error() const {
  std::lock_guard lock(mu_);
  return error_;
}

bool PcapWriter::fail_locked(const char* what) {
  error_ = std::string("pcap: ") + what + " " + path_ + ": " + std::strerror(errno);
  if (file_) std::fclose(file_);
  file_ = nullptr;
  return false;
}

}  // namespace sv::net
