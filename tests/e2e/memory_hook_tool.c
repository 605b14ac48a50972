// Registers memory in a process whose memory hooks are UCX's (Debian's
// libucm, as UCX, Open MPI and MPICH install them), the way a UCX
// registration cache meets ibv_reg_mr.
//
// The hook counts the unmap events it sees for the buffer twice: in a
// static variable, and in a word on the first page under the MR (outside
// its bytes), where a program's allocator puts its own state beside a
// buffer. A real device changes no mapping when it registers memory, so
// the hook must see no unmap of the buffer; and a write the hook makes
// must stay written (softverbs once replaced the pages under the hook's
// feet: UCX's registration cache lost the write that queued an
// invalidation, and its page table broke: MPICH died in ucs_pgtable_insert).
//
// Prints "hook calls N, writes kept M, bytes intact yes|no" and exits 0
// when N == 0, M == N and the bytes are intact; 1 otherwise; 77 without a
// device or when libucm installs no hook.
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <ucm/api/ucm.h>
#include <unistd.h>

struct page_state {
  volatile long unmaps_seen;  // written by the hook, lives on the registered page
};

// volatile: glibc declares mmap and munmap leaf functions, which lets the
// compiler move stores to these past the calls whose hooks read them.
static struct page_state* volatile state;
static volatile uintptr_t watched_start, watched_end;
static volatile long hook_calls;

static void on_unmap(ucm_event_type_t type, ucm_event_t* event, void* arg) {
  (void)type, (void)arg;
  const uintptr_t a = (uintptr_t)event->vm_unmapped.address, b = a + event->vm_unmapped.size;
  if (a < watched_end && b > watched_start) {
    ++hook_calls;
    ++state->unmaps_seen;
  }
}

int main(void) {
  const long page = sysconf(_SC_PAGESIZE);
  uint8_t* base = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return perror("mmap"), 1;
  state = (struct page_state*)base;
  watched_start = (uintptr_t)base;
  watched_end = watched_start + 2 * page;
  uint8_t* buf = base + 256;  // the MR: [base+256, base+page+256), on both pages
  const size_t len = (size_t)page;
  for (size_t i = 0; i < len; ++i) buf[i] = (uint8_t)(i * 7 + 1);

  if (ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, on_unmap, NULL) != UCS_OK) {
    printf("libucm installed no hook\n");
    return 77;
  }
  // The hook works: an unmap of a page of our own reaches it.
  void* probe = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  uintptr_t saved_start = watched_start, saved_end = watched_end;
  watched_start = (uintptr_t)probe, watched_end = watched_start + page;
  munmap(probe, page);
  const long probe_calls = hook_calls;
  watched_start = saved_start, watched_end = saved_end;
  hook_calls = 0;
  state->unmaps_seen = 0;
  if (probe_calls == 0) {
    printf("libucm's hook did not see munmap\n");
    return 77;
  }

  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  struct ibv_context* ctx = list && n ? ibv_open_device(list[0]) : NULL;
  struct ibv_pd* pd = ctx ? ibv_alloc_pd(ctx) : NULL;
  if (!pd) return perror("device"), 77;
  struct ibv_mr* mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!mr) return perror("ibv_reg_mr"), 1;

  int intact = 1;
  for (size_t i = 0; i < len; ++i) intact &= buf[i] == (uint8_t)(i * 7 + 1);
  printf("hook calls %ld, writes kept %ld, bytes intact %s\n", hook_calls, state->unmaps_seen,
         intact ? "yes" : "no");
  ibv_dereg_mr(mr);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  return hook_calls == 0 && state->unmaps_seen == hook_calls && intact ? 0 : 1;
}
