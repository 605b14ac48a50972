#include "core/check_buffers.h"

#include <zlib.h>

#include <algorithm>

#include "core/check.h"
#include "core/qp.h"

namespace sv::check {
namespace {

// What a work request reads from local memory and sends: SENDs and WRITEs
// not sent inline (inline data is copied at the post: the buffer is free
// at once). READs and atomics write into local memory instead.
bool sends_from_memory(const ibv_send_wr& wr) {
  if (wr.send_flags & IBV_SEND_INLINE) return false;
  switch (wr.opcode) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
    case IBV_WR_SEND_WITH_INV:
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      return true;
    default:
      return false;
  }
}

// SGEs kept per send queue slot.
uint32_t sges_per_slot(const Qp* qp) { return std::max(qp->cap.max_send_sge, 1u); }

uint32_t sum_of(const ibv_sge* sges, uint32_t n) {
  uLong crc = crc32(0, nullptr, 0);
  for (uint32_t i = 0; i < n; ++i)
    if (sges[i].length) crc = crc32(crc, reinterpret_cast<const Bytef*>(sges[i].addr), sges[i].length);
  return static_cast<uint32_t>(crc);
}

}  // namespace

void size_post_records(Qp* qp) {
  qp->check_wrs.assign(qp->cap.max_send_wr, Qp::CheckedWr{});
  qp->check_sges.assign(uint64_t{qp->cap.max_send_wr} * sges_per_slot(qp), ibv_sge{});
}

void record_post(Qp* qp, uint64_t pos, const ibv_send_wr& wr) {
  if (qp->check_wrs.empty()) return;
  Qp::CheckedWr& c = qp->check_wrs[pos & qp->sq_mask];
  c.num_sge = 0;
  if (!sends_from_memory(wr) || wr.num_sge <= 0) return;
  const uint32_t n = std::min<uint32_t>(wr.num_sge, sges_per_slot(qp));
  ibv_sge* kept = &qp->check_sges[(pos & qp->sq_mask) * sges_per_slot(qp)];
  std::copy(wr.sg_list, wr.sg_list + n, kept);
  c.num_sge = n;
  c.wr_id = wr.wr_id;
  c.sum = sum_of(kept, n);
}

void verify_freed(Qp* qp) {
  if (qp->check_wrs.empty()) return;
  const uint64_t head = qp->sq_head.load(std::memory_order_acquire);
  uint64_t pos = qp->check_verified;
  // (After a reset the positions start again; at most a queue's worth is
  // still recorded.)
  if (pos > head || head - pos > qp->cap.max_send_wr) pos = head - std::min<uint64_t>(head, qp->cap.max_send_wr);
  for (; pos != head; ++pos) {
    Qp::CheckedWr& c = qp->check_wrs[pos & qp->sq_mask];
    if (!c.num_sge) continue;
    const ibv_sge* kept = &qp->check_sges[(pos & qp->sq_mask) * sges_per_slot(qp)];
    const uint32_t n = c.num_sge;
    c.num_sge = 0;
    if (sum_of(kept, n) != c.sum) {
      report("buffer-reused",
             "work request %lu of QP %#x (wr_id %#lx): the memory it sends (lkey %#x, %#lx, %u bytes%s) changed "
             "between ibv_post_send and the poll of its completion: a NIC sends whatever it reads, before or after "
             "the change; wait for the completion before writing the buffer",
             static_cast<unsigned long>(pos), qp->qp_base.qp_num, static_cast<unsigned long>(c.wr_id), kept[0].lkey,
             static_cast<unsigned long>(kept[0].addr), kept[0].length, n > 1 ? ", first SGE" : "");
      break;
    }
  }
  qp->check_verified = head;
}

}  // namespace sv::check
