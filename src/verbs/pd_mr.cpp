// Protection domains and memory regions.
#include "core/mr.h"
#include "core/pd.h"
#include "verbs/abi.h"

using namespace sv;

SV_EXPORT_1_1(ibv_alloc_pd) ibv_pd* sv_ibv_alloc_pd(ibv_context* context) {
  return abi::guarded<ibv_pd*>(nullptr, [&] { return static_cast<ibv_pd*>(alloc_pd(Context::from(context))); });
}

SV_EXPORT_1_1(ibv_dealloc_pd) int sv_ibv_dealloc_pd(ibv_pd* pd) { return dealloc_pd(Pd::from(pd)); }

SV_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access) {
  if (!pd) return abi::fail_null<ibv_mr>(EINVAL);
  return abi::guarded<ibv_mr*>(nullptr, [&] {
    return static_cast<ibv_mr*>(reg_mr(Pd::from(pd), addr, length, iova, access));
  });
}

SV_EXPORT_1_1(ibv_reg_mr) ibv_mr* sv_ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<uintptr_t>(addr), static_cast<unsigned>(access));
}

#undef ibv_reg_mr_iova
SV_EXPORT ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, iova, static_cast<unsigned>(access));
}

SV_EXPORT ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  return abi::fail_null<ibv_mr>(EOPNOTSUPP);  // no dma-buf exporters reach a software device
}

SV_EXPORT_1_1(ibv_rereg_mr) int sv_ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length, int access) {
  return abi::guarded<int>(IBV_REREG_MR_ERR_INPUT, [&] {
    return rereg_mr(Mr::from(mr), flags, pd ? Pd::from(pd) : nullptr, addr, length, static_cast<unsigned>(access));
  });
}

SV_EXPORT_1_1(ibv_dereg_mr) int sv_ibv_dereg_mr(ibv_mr* mr) { return dereg_mr(Mr::from(mr)); }
