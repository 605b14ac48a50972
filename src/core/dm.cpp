#include "core/dm.h"

#include <cerrno>
#include <cstring>

#include "core/handles.h"
#include "core/limits.h"
#include "util/bits.h"

namespace sv {
namespace {

// Device memory in use by this process, against limits::kMaxDmSize.
std::atomic<uint64_t> g_dm_in_use{0};
std::atomic<uint32_t> g_next_dm_handle{1};

// Device memory is reached in aligned 4-byte words, as mlx5's is
// (mlx5_access_dm): a copy beyond the allocation is EFAULT, one at an offset
// or of a length that is not a multiple of 4 is EINVAL.
int check_copy(const Dm* dm, uint64_t offset, size_t len) {
  if (offset > dm->length || len > dm->length - offset) return EFAULT;
  if ((offset | len) & 3) return EINVAL;
  return 0;
}

int copy_to(ibv_dm* d, uint64_t offset, const void* src, size_t len) {
  Dm* dm = Dm::from(d);
  if (int e = check_copy(dm, offset, len)) return e;
  std::memcpy(dm->base + offset, src, len);
  return 0;
}

int copy_from(void* dst, ibv_dm* d, uint64_t offset, size_t len) {
  Dm* dm = Dm::from(d);
  if (int e = check_copy(dm, offset, len)) return e;
  std::memcpy(dst, dm->base + offset, len);
  return 0;
}

}  // namespace

Dm* alloc_dm(Context* ctx, const ibv_alloc_dm_attr& attr) {
  // log_align_req: the start aligned to 2^log_align_req bytes (page at most).
  if (attr.comp_mask || attr.length == 0 || attr.log_align_req > 12) {
    errno = EINVAL;
    return nullptr;
  }
  if (attr.length > limits::kMaxDmSize) {
    errno = ENOMEM;
    return nullptr;
  }
  const uint64_t align = uint64_t{1} << attr.log_align_req;
  const uint64_t block = attr.length + (align > 64 ? align : 0);
  if (g_dm_in_use.fetch_add(attr.length) + attr.length > limits::kMaxDmSize) {
    g_dm_in_use.fetch_sub(attr.length);
    errno = ENOMEM;
    return nullptr;
  }
  shm::Arena& arena = ctx->host->arena();
  uint64_t off = arena.alloc(block);
  if (!off) {
    g_dm_in_use.fetch_sub(attr.length);
    errno = ENOMEM;
    return nullptr;
  }
  auto* dm = new Dm();
  dm->ctx = ctx;
  dm->arena_off = off;
  dm->block_len = block;
  dm->base = arena.base() + align_up(off, align);
  dm->length = attr.length;
  dm->context = ctx->ibv();
  dm->memcpy_to_dm = copy_to;
  dm->memcpy_from_dm = copy_from;
  dm->comp_mask = 0;
  dm->handle = g_next_dm_handle.fetch_add(1);
  dm->serial = handles::publish(handles::Kind::kDm, dm->handle, dm);
  return dm;
}

int free_dm(Dm* dm) {
  if (dm->mr_uses->load() != 0) return EBUSY;
  if (!handles::retire(handles::Kind::kDm, dm->handle, dm->serial)) return EINVAL;  // freed through another struct
  // Every struct of the DM has the block's geometry: this one can free it.
  dm->ctx->host->arena().free(dm->arena_off, dm->block_len);
  g_dm_in_use.fetch_sub(dm->length);
  delete dm;
  return 0;
}

Dm* import_dm(Context* ctx, uint32_t handle) {
  auto* dm = new Dm();
  bool found = handles::visit(handles::Kind::kDm, handle, [&](void* owner, uint64_t serial) {
    const Dm* original = static_cast<const Dm*>(owner);
    dm->arena_off = original->arena_off;
    dm->block_len = original->block_len;
    dm->base = original->base;
    dm->length = original->length;
    dm->mr_uses = original->mr_uses;
    dm->serial = serial;
  });
  if (!found) {
    delete dm;
    errno = EINVAL;
    return nullptr;
  }
  dm->ctx = ctx;
  dm->context = ctx->ibv();
  dm->memcpy_to_dm = copy_to;
  dm->memcpy_from_dm = copy_from;
  dm->comp_mask = 0;
  dm->handle = handle;
  dm->imported = true;
  return dm;
}

// Frees the struct only; while MRs map the DM it stays (they point at it).
void unimport_dm(Dm* dm) {
  if (dm->imported && dm->mr_uses->load() == 0) delete dm;
}

}  // namespace sv
