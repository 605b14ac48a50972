// Registers memory the way an application meets RLIMIT_MEMLOCK, printing
// one line per step ("<step> ok" or "<step> <errno name>"):
//   reg_small   a 16 KiB buffer
//   reg_big     a 64 MiB buffer (past a small `ulimit -l`)
//   reg_odp     the same 64 MiB on demand (pins nothing: not charged)
//   rereg_grow  the small MR moved onto the 64 MiB buffer
//   reg_again   16 KiB more, after the small MR is deregistered
// It exits 0 when every verb answered (with success or an error), 1 when
// the device could not be set up.
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static void say(const char* step, int ok) {
  printf("%s %s\n", step, ok ? "ok" : strerrorname_np(errno));
}

int main(void) {
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  struct ibv_context* ctx = list && n ? ibv_open_device(list[0]) : NULL;
  struct ibv_pd* pd = ctx ? ibv_alloc_pd(ctx) : NULL;
  if (!pd) return perror("device"), 1;
  const size_t small = 16 << 10, big = 64 << 20;
  void* a = mmap(NULL, small, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void* b = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (a == MAP_FAILED || b == MAP_FAILED) return perror("mmap"), 1;
  const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  struct ibv_mr* mr_small = ibv_reg_mr(pd, a, small, rw);
  say("reg_small", mr_small != NULL);
  struct ibv_mr* mr_big = ibv_reg_mr(pd, b, big, rw);
  say("reg_big", mr_big != NULL);
  struct ibv_mr* mr_odp = ibv_reg_mr(pd, b, big, rw | IBV_ACCESS_ON_DEMAND);
  say("reg_odp", mr_odp != NULL);
  if (mr_small) {
    int rc = ibv_rereg_mr(mr_small, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, b, big, 0);
    if (rc) errno = errno ? errno : EIO;
    say("rereg_grow", rc == 0);
    ibv_dereg_mr(mr_small);
  }
  struct ibv_mr* mr_again = ibv_reg_mr(pd, a, small, rw);
  say("reg_again", mr_again != NULL);
  if (mr_again) ibv_dereg_mr(mr_again);
  if (mr_big) ibv_dereg_mr(mr_big);
  if (mr_odp) ibv_dereg_mr(mr_odp);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  return 0;
}
