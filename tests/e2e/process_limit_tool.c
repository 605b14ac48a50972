// Opens the first device in N child processes at once, each holding it open
// until all have tried, and prints how many opened it and the errno of the
// first that could not: the per-domain process limit as an application sees it.
// With a second argument C, the parent then opens the device too (while the
// children hold theirs: it gets the next registry slot) and creates and
// destroys a UD QP C times, printing the largest QPN it was given and how
// often it was a number no QP may have (0, 1, 0xffffff: the multicast QPN).
// With HOLD_UNTIL_FILE set, the children hold the device, once all have
// tried and the counts are printed, until that file exists (so a test can
// fill another namespace's registry while this one's is full).
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int open_first_device(void) {
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) return ENODEV;
  struct ibv_context* ctx = ibv_open_device(list[0]);
  int err = ctx ? 0 : (errno ? errno : EIO);
  ibv_free_device_list(list);
  return err;  // an opened context stays open until the process exits
}

static int cycle_qps(long cycles) {
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  struct ibv_context* ctx = list && n ? ibv_open_device(list[0]) : NULL;
  if (!ctx) return perror("parent: ibv_open_device"), 1;
  struct ibv_pd* pd = ibv_alloc_pd(ctx);
  struct ibv_cq* cq = ibv_create_cq(ctx, 1, NULL, NULL, 0);
  if (!pd || !cq) return perror("parent: pd/cq"), 1;
  uint32_t max_qpn = 0;
  long reserved = 0;
  for (long i = 0; i < cycles; ++i) {
    struct ibv_qp_init_attr a = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
                                 .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
    struct ibv_qp* qp = ibv_create_qp(pd, &a);
    if (!qp) return fprintf(stderr, "parent: ibv_create_qp %ld: %s\n", i, strerror(errno)), 1;
    if (qp->qp_num > max_qpn) max_qpn = qp->qp_num;
    if (qp->qp_num <= 1 || qp->qp_num == 0xffffff) ++reserved;
    ibv_destroy_qp(qp);
  }
  printf("qp_cycles %ld max_qpn %#x reserved_qpns_given %ld\n", cycles, max_qpn, reserved);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  return 0;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 0;
  long qp_cycles = argc > 2 ? atol(argv[2]) : 0;
  if (n <= 0) {
    fprintf(stderr, "usage: %s <processes> [qp-cycles]\n", argv[0]);
    return 2;
  }
  int results[2], release[2];
  if (pipe(results) || pipe(release)) return perror("pipe"), 1;
  pid_t* kids = calloc((size_t)n, sizeof(pid_t));
  for (int i = 0; i < n; ++i) {
    kids[i] = fork();
    if (kids[i] < 0) return perror("fork"), 1;
    if (kids[i] == 0) {
      close(results[0]);
      close(release[1]);
      int err = open_first_device();
      if (write(results[1], &err, sizeof err) != sizeof err) _exit(3);
      char c;
      while (read(release[0], &c, 1) > 0) {}  // until the parent closes it: everyone holds at once
      _exit(0);
    }
  }
  close(results[1]);
  close(release[0]);
  int opened = 0, first_error = 0, got = 0, err;
  while (got < n && read(results[0], &err, sizeof err) == sizeof err) {
    ++got;
    if (err == 0) ++opened;
    else if (!first_error) first_error = err;
  }
  int parent_err = qp_cycles > 0 ? cycle_qps(qp_cycles) : 0;
  const char* hold = getenv("HOLD_UNTIL_FILE");
  if (hold) {
    printf("holding: opened %d first_error %d\n", opened, first_error);
    fflush(stdout);
    while (access(hold, F_OK) != 0) usleep(20000);
  }
  close(release[1]);
  int bad_exit = 0;
  for (int i = 0; i < n; ++i) {
    int st = 0;
    waitpid(kids[i], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ++bad_exit;
  }
  printf("processes %d answered %d opened %d first_error %d (%s) bad_exits %d\n", n, got, opened, first_error,
         first_error ? strerror(first_error) : "none", bad_exit);
  return got == n && bad_exit == 0 && parent_err == 0 ? 0 : 1;
}
