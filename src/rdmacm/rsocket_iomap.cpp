// rsockets: direct data placement. riomap registers a buffer and announces
// it in a slot of the peer's iomap table (RDMA WRITE WITH IMM of an
// IomapEntry); the peer's riowrite finds the entry in its own table and
// writes straight into the buffer with RDMA WRITE, without the owner
// taking part. riounmap forgets the buffer locally (as rdma-core: the
// peer's entry stays, and writes to it fail).
#include <endian.h>
#include <rdma/rsocket.h>
#include <sys/mman.h>
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "c_boundary.h"
#include "rsocket_stream.h"
#include "rsocket_wr.h"

using namespace sv::rdmacm;
using namespace sv::rdmacm::rs;

namespace {

constexpr uint32_t kMaxTransfer = 65536;

int free_slot(const RSocket& rs) {
  for (uint32_t slot = 0; slot < rs.peer.iomap_slots; ++slot) {
    bool used = std::any_of(rs.iomaps.begin(), rs.iomaps.end(),
                            [&](const LocalIomap& m) { return m.slot == int(slot); });
    if (!used) return static_cast<int>(slot);
  }
  return -1;
}

// Posts an RDMA WRITE (WITH IMM when `imm` is set) of `len` bytes from
// `src`, inline when small enough, else through the staging buffer (the
// caller made sure there is room: writable_now()).
// `src_mr`: src is registered already (no staging).
int post_write(RSocket& rs, const void* src, uint32_t len, uint64_t remote_addr, uint32_t rkey,
               const uint32_t* imm, const ibv_mr* src_mr = nullptr) {
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  ibv_sge sge{};
  uint32_t staged = 0;
  sge.length = len;
  if (len <= rs.inline_size) {
    sge.addr = reinterpret_cast<uintptr_t>(src);
    wr.send_flags = IBV_SEND_INLINE;
  } else if (src_mr) {
    sge.addr = reinterpret_cast<uintptr_t>(src);
    sge.lkey = src_mr->lkey;
  } else {
    StagingRing::Span piece = rs.staging.take(len);  // len: what available() offered
    std::memcpy(rs.sbuf + piece.offset, src, piece.length);
    sge.addr = reinterpret_cast<uintptr_t>(rs.sbuf + piece.offset);
    sge.lkey = rs.smr->lkey;
    staged = piece.accounted;
  }
  wr.wr_id = wr_id(WrKind::kWrite, staged);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  if (imm) wr.imm_data = htobe32(*imm);
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  int rc = ibv_post_send(rs.id->qp, &wr, &bad);
  if (rc) {
    rs.staging.release(staged);
    if (!rs.conn_error) rs.conn_error = ECONNRESET;
    return fail(rc);
  }
  --rs.sqe_avail;
  if (imm) rs.credits.spend();
  return 0;
}

// Bytes (up to `want`) one write can carry now: a spare send slot, and
// inline room or staging room.
uint32_t writable_now(const RSocket& rs, uint32_t want) {
  if (rs.sqe_avail <= 1) return 0;
  if (want <= rs.inline_size) return want;
  uint32_t room = rs.staging.available(want);
  return room ? room : rs.inline_size;
}

int announce(RSocket& rs, Lock& lock, LocalIomap& map) {
  IomapEntry entry{};
  entry.offset = map.offset;
  entry.addr = reinterpret_cast<uintptr_t>(map.addr);
  entry.rkey = map.mr->rkey;
  entry.length = static_cast<uint32_t>(std::min<size_t>(map.length, UINT32_MAX));
  if (!rs.announce_buf) {
    // Each slot's entry has its own place, untouched until it is sent.
    const size_t len = size_t(rs.peer.iomap_slots) * sizeof(IomapEntry);
    rs.announce_pages = map_pages(len);
    rs.announce_buf = reinterpret_cast<IomapEntry*>(rs.announce_pages.data);
    if (!rs.announce_buf) return -1;
    rs.announce_mr = ibv_reg_mr(rs.pd, rs.announce_buf, len, IBV_ACCESS_LOCAL_WRITE);
    if (!rs.announce_mr) return -1;
  }
  auto room = [&] {
    return send_side_closed(rs) || (rs.credits.can_send_data() && rs.sqe_avail > 1);
  };
  if (wait_until(rs, lock, false, room) != 0) return -1;
  if (send_side_closed(rs)) return fail(send_error(rs));
  IomapEntry* staged = &rs.announce_buf[map.slot];
  *staged = entry;
  const uint32_t imm = imm_pack(Op::kIomap, static_cast<uint32_t>(map.slot));
  if (post_write(rs, staged, sizeof entry,
                 rs.peer.iomap_addr + uint64_t(map.slot) * sizeof(IomapEntry), rs.peer.iomap_rkey,
                 &imm, rs.announce_mr) != 0)
    return -1;
  map.announced = true;
  return 0;
}

bool find_target(const RSocket& rs, uint64_t offset, IomapEntry* out) {
  const IomapEntry* table = rs.iomap_table();
  std::atomic_thread_fence(std::memory_order_acquire);
  for (uint32_t i = 0; i < rs.opt.iomap_slots; ++i) {
    IomapEntry e;
    std::memcpy(&e, &table[i], sizeof e);
    if (e.length && offset >= e.offset && offset - e.offset < e.length) {
      *out = e;
      return true;
    }
  }
  return false;
}

}  // namespace

extern "C" SOFTVERBS_RDMACM_EXPORT off_t riomap(int socket, void* buf, size_t len, int prot,
                                                int flags, off_t offset) {
  auto rs = lookup(socket);
  if (!rs) return fail_as<off_t>(EBADF);
  if (rs->type != SOCK_STREAM || (prot & ~PROT_WRITE) || flags || !buf || !len)
    return fail_as<off_t>(EINVAL);
  return guarded<off_t>(-1, [&]() -> off_t {
    std::lock_guard<std::mutex> serial(rs->send_mutex);
    Lock lock(rs->mutex);
    if (rs->phase != Phase::kConnected && rs->phase != Phase::kAccepting)
      return fail_as<off_t>(EINVAL);
    LocalIomap map{buf,     len, offset == -1 ? reinterpret_cast<uintptr_t>(buf) : uint64_t(offset),
                   nullptr, -1,  false};
    int access = IBV_ACCESS_LOCAL_WRITE | ((prot & PROT_WRITE) ? IBV_ACCESS_REMOTE_WRITE : 0);
    if (prot & PROT_WRITE) {
      map.slot = free_slot(*rs);
      if (map.slot < 0) return fail_as<off_t>(ENOMEM);
    }
    map.mr = ibv_reg_mr(rs->pd, buf, len, access);
    if (!map.mr) return -1;
    rs->iomaps.push_back(map);
    if (map.slot >= 0) {
      if (rs->phase == Phase::kAccepting && drive_connection(*rs, lock, false) != 0) return -1;
      if (announce(*rs, lock, rs->iomaps.back()) != 0) {
        int err = errno;
        ibv_dereg_mr(rs->iomaps.back().mr);
        rs->iomaps.pop_back();
        return fail_as<off_t>(err);
      }
    }
    return static_cast<off_t>(map.offset);
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int riounmap(int socket, void* buf, size_t len) {
  auto rs = lookup(socket);
  if (!rs) return fail(EBADF);
  return guarded(-1, [&] {
    std::lock_guard<std::mutex> serial(rs->send_mutex);
    Lock lock(rs->mutex);
    auto it = std::find_if(rs->iomaps.begin(), rs->iomaps.end(),
                           [&](const LocalIomap& m) { return m.addr == buf && m.length == len; });
    if (it == rs->iomaps.end()) return fail(EINVAL);
    ibv_dereg_mr(it->mr);
    rs->iomaps.erase(it);
    return 0;
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT size_t riowrite(int socket, const void* buf, size_t count,
                                                   off_t offset, int flags) {
  auto rs = lookup(socket);
  if (!rs) return fail_as<size_t>(EBADF);
  if (rs->type != SOCK_STREAM || (!buf && count)) return fail_as<size_t>(EINVAL);
  return guarded<size_t>(SIZE_MAX, [&]() -> size_t {
    std::lock_guard<std::mutex> serial(rs->send_mutex);
    Lock lock(rs->mutex);
    const bool nonblock = rs->nonblocking(flags);
    if (rs->phase != Phase::kConnected && drive_connection(*rs, lock, nonblock) != 0)
      return fail_as<size_t>(errno);
    size_t done = 0;
    const auto* src = static_cast<const uint8_t*>(buf);
    while (done < count) {
      IomapEntry target;
      if (!find_target(*rs, uint64_t(offset) + done, &target)) {
        if (done) break;
        return fail_as<size_t>(EINVAL);
      }
      auto room = [&] { return send_side_closed(*rs) || writable_now(*rs, 1) > 0; };
      if (wait_until(*rs, lock, nonblock, room) != 0) {
        if (done) break;
        return SIZE_MAX;
      }
      if (send_side_closed(*rs)) {
        if (done) break;
        return fail_as<size_t>(send_error(*rs));
      }
      const uint64_t at = uint64_t(offset) + done - target.offset;
      uint32_t n = static_cast<uint32_t>(
          std::min<uint64_t>({count - done, kMaxTransfer, target.length - at}));
      n = writable_now(*rs, n);
      if (post_write(*rs, src + done, n, target.addr + at, target.rkey, nullptr) != 0) {
        if (done) break;
        return SIZE_MAX;
      }
      done += n;
    }
    return done;
  });
}
