// rsockets: the state of one rsocket and the table that finds it by its
// socket number.
//
// The socket number is a real fd, as with rdma-core: a stream rsocket's is
// the fd of its own CM event channel (every rsocket has one), a datagram
// rsocket's is its UDP socket. librspreload and rpoll rely on that.
//
// Locks (as rdma-core's rsocket.c): `send_mutex` serialises senders,
// `recv_mutex` receivers; `mutex` guards everything else (the CM and the
// CQ, rings and credits) and is never held while sleeping. One thread at a
// time sleeps on the socket's fds (`sleeper`); others wait on `wakeup`.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "rsocket_memory.h"
#include "rsocket_ring.h"
#include "rsocket_wire.h"
#include "util/private_heap.h"

namespace sv::rdmacm::rs {

struct DgramState;  // rsocket_dgram.cpp
struct DgramDeleter {
  void operator()(DgramState* d) const noexcept;
};

// Sizes and options set before connecting (rsetsockopt), with rdma-core's
// defaults.
struct Options {
  uint32_t sq_size = 384;
  uint32_t rq_size = 384;
  uint32_t inline_size = 64;
  uint32_t sbuf_size = 1u << 17;
  uint32_t rbuf_size = 1u << 17;
  uint32_t iomap_slots = 0;
  // Stored and reported back (no effect on the transport).
  bool reuseaddr = false;
  bool keepalive = false;
  bool nodelay = false;
  int keepidle = 7200;
  int maxseg = 2048;
  int v6only = 0;
  linger linger_value{};
};

enum class Phase {
  kIdle,
  kBound,
  kListening,
  kResolvingAddr,
  kResolvingRoute,
  kConnecting,  // REQ sent
  kAccepting,   // accepted, waiting for ESTABLISHED
  kConnected,
  kFailed,  // connecting failed (so_error) or the connection broke
};

// A local riomap registration.
struct LocalIomap {
  void* addr;
  size_t length;
  uint64_t offset;
  ibv_mr* mr;
  int slot;  // its entry in the peer's table
  bool announced;
};

struct RSocket : PrivateHeapObject {
  int type = SOCK_STREAM;
  int domain = AF_INET;
  int fd = -1;
  std::atomic<int> fd_flags{0};  // O_NONBLOCK as set by rfcntl
  Options opt;

  std::mutex send_mutex;
  std::mutex recv_mutex;
  std::mutex mutex;
  std::condition_variable wakeup;
  bool sleeper = false;
  bool closed = false;  // rclose ran: waiters give up with EBADF

  // --- stream ---
  Phase phase = Phase::kIdle;
  int so_error = 0;      // pending error (SO_ERROR, failed nonblocking connect)
  int conn_error = 0;    // the connection broke: ECONNRESET
  bool shut_rd = false;  // local shutdown
  bool shut_wr = false;
  bool peer_eof = false;   // the peer writes no more
  bool peer_gone = false;  // the peer neither reads nor writes (EPIPE)
  uint64_t last_cm_check_ns = 0;

  rdma_event_channel* channel = nullptr;
  rdma_cm_id* id = nullptr;
  PrivateDeque<rdma_cm_event*> backlog;  // listener: CONNECT_REQUESTs not accepted yet

  ibv_pd* pd = nullptr;
  ibv_comp_channel* comp_channel = nullptr;
  ibv_cq* cq = nullptr;
  bool cq_armed = false;
  unsigned unacked_cq_events = 0;
  uint8_t* sbuf = nullptr;  // sbuf_pages.data
  ibv_mr* smr = nullptr;
  uint8_t* rbuf = nullptr;  // rbuf_pages.data: receive ring, then our iomap table
  ibv_mr* rmr = nullptr;
  Pages sbuf_pages;
  Pages rbuf_pages;
  uint32_t sq_size = 0;
  uint32_t rq_size = 0;
  uint32_t inline_size = 0;
  uint32_t sqe_avail = 0;

  ConnData peer{};
  StagingRing staging;
  RemoteRing remote;
  ReceiveRing ring;
  MessageCredits credits;
  GrantLedger ledger;

  PrivateVector<LocalIomap> iomaps;
  IomapEntry* announce_buf = nullptr;  // what riomap sends, one place per peer slot
  Pages announce_pages;
  ibv_mr* announce_mr = nullptr;

  // --- datagram ---
  std::unique_ptr<DgramState, DgramDeleter> dgram;

  RSocket();
  ~RSocket();
  bool nonblocking(int msg_flags) const;
  IomapEntry* iomap_table() const;  // our table (entries the peer wrote)
};

// The table of rsockets by socket number.
std::shared_ptr<RSocket> lookup(int fd);
void table_insert(const std::shared_ptr<RSocket>& rs);
void table_remove(int fd);

// Process-wide defaults read once from /etc/rdma/rsocket (as rdma-core).
struct Defaults {
  uint32_t polling_time_us = 10;
  Options options;
};
const Defaults& defaults();

uint64_t now_ns();

}  // namespace sv::rdmacm::rs
