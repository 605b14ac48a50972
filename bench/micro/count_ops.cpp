// A fixed number of operations through the loopback pair, for
// `valgrind --tool=callgrind` (instructions are repeatable where time is
// not):  count_ops write|send|read|write_lat|send_lat|write_lat_ex|send_lat_ex N
// The *_lat modes do what one side of ib_write_lat / ib_send_lat does per
// iteration: an inline, signaled post and a poll of its completion.
#include <cstdlib>
#include <cstring>

#include "loopback.h"

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  int n = std::atoi(argv[2]);
  Loopback l;
  for (int i = 1; i <= n; ++i) {
    if (!std::strcmp(argv[1], "write")) {
      l.post(IBV_WR_RDMA_WRITE, 8, i % 64 == 0);
      if (i % 64 == 0) Loopback::wait(l.cq_a);
    } else if (!std::strcmp(argv[1], "write_lat")) {
      l.post(IBV_WR_RDMA_WRITE, 8, true, true);
      Loopback::wait(l.cq_a);
    } else if (!std::strcmp(argv[1], "write_lat_ex")) {
      l.post_ex(IBV_WR_RDMA_WRITE, 8, true);
      Loopback::wait(l.cq_a);
    } else if (!std::strcmp(argv[1], "send_lat_ex")) {
      l.post_recv(8);
      l.post_ex(IBV_WR_SEND, 8, true);
      Loopback::wait(l.cq_b);
      Loopback::wait(l.cq_a);
    } else if (!std::strcmp(argv[1], "send_lat")) {
      l.post_recv(8);
      l.post(IBV_WR_SEND, 8, true, true);
      Loopback::wait(l.cq_b);
      Loopback::wait(l.cq_a);
    } else if (!std::strcmp(argv[1], "send")) {
      l.post_recv(8);
      l.post(IBV_WR_SEND, 8, i % 64 == 0);
      Loopback::wait(l.cq_b);
      if (i % 64 == 0) Loopback::wait(l.cq_a);
    } else {
      l.post(IBV_WR_RDMA_READ, 8, true);
      Loopback::wait(l.cq_a);
    }
  }
  return 0;
}
