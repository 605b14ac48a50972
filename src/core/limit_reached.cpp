#include "core/limit_reached.h"

#include <atomic>

#include "shm/layout.h"
#include "util/log.h"

namespace sv {

namespace {

struct LimitText {
  const char* call;
  const char* what;
  const char* where;  // where a program reads it
};

constexpr LimitText kTexts[] = {
    {"ibv_create_qp", "QPs", "max_qp of ibv_query_device"},
    {"ibv_reg_mr", "memory regions", "max_mr of ibv_query_device"},
    {"ibv_create_cq", "CQs", "max_cq of ibv_query_device"},
    {"ibv_alloc_pd", "protection domains", "max_pd of ibv_query_device"},
    {"ibv_create_ah", "address handles", "max_ah of ibv_query_device"},
    {"ibv_create_srq", "SRQs", "max_srq of ibv_query_device"},
    {"ibv_alloc_mw", "memory windows", "max_mw of ibv_query_device"},
    {"ibv_create_qp", "QP numbers of this process", "max_qp of ibv_query_device"},
    {"ibv_reg_mr", "memory keys of this process", "max_mr of ibv_query_device"},
    {"a create call", "blocks of 256 names (QP numbers, memory keys or SRQ numbers) of this host",
     "2^24 names of each kind, shared by the host's processes"},
    {"a create call", "bytes of this process's shared-memory arena", "SOFTVERBS_ARENA_GB, in GiB"},
};
static_assert(sizeof kTexts / sizeof kTexts[0] == static_cast<size_t>(Limit::kCount));

std::atomic<bool> g_said[static_cast<size_t>(Limit::kCount)];

}  // namespace

void limit_reached(Limit which, uint64_t limit) {
  const auto i = static_cast<size_t>(which);
  if (g_said[i].exchange(true, std::memory_order_relaxed)) return;
  const LimitText& t = kTexts[i];
  SV_WARN("%s: ENOMEM: all %llu %s are in use (the device's limit: %s). Said once.", t.call,
          static_cast<unsigned long long>(limit), t.what, t.where);
}

void name_limit_reached(bool host_blocks_out, Limit which, uint64_t limit) {
  if (host_blocks_out)
    limit_reached(Limit::kHostNames, shm::kNameBlocks);
  else
    limit_reached(which, limit);
}

}  // namespace sv
