// A doorbell: how any process wakes a thread of the owner that sleeps in
// poll()/read() on a file descriptor (a completion channel's fd, the async
// event fd). It is a pipe; peers open its write end through
// /proc/<owner pid>/fd/<n> (same-user permission, like the arena) and write
// one byte. The bytes carry no meaning: state lives in shared memory, the
// byte only makes the fd readable.
#pragma once

#include <cstdint>

namespace sv::shm {

class Arena;

class Doorbell {
 public:
  // Creates the pipe and publishes it in the arena's doorbell table.
  // Returns false (errno set) on failure.
  bool open(Arena& arena);
  void close(Arena& arena);

  int read_fd() const { return read_fd_; }
  uint32_t index() const { return index_; }
  uint32_t gen() const { return gen_; }

  // Makes read_fd readable (used by the owner itself).
  void ring() const;
  // Consumes pending wake-up bytes without blocking.
  void drain() const;

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
  uint32_t index_ = 0;
  uint32_t gen_ = 0;
};

// Writes one byte to an already opened doorbell write end of a peer. A
// doorbell whose reader has closed it is rung without effect: no SIGPIPE.
void ring_fd(int fd);

}  // namespace sv::shm
