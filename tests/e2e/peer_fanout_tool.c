// One process that talks to many peers of its host (issue 39 item 2): N
// child processes each open the device, post a receive on a UD QP and sleep
// on a completion channel; the parent then sends each of them a UD message
// (the data lands in the child's registered memory, the child's doorbell
// wakes it) and waits for every child to say it got its own message intact.
// It prints how many arrived, the address space the parent's arena
// mappings take (its own and what it mapped of the others'), its open
// descriptors, and its VmSize.
//   peer_fanout_tool N
#include <dirent.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { kMsg = 64 };

struct dev {
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_comp_channel* ch;
  struct ibv_cq* cq;
  struct ibv_qp* qp;
  union ibv_gid gid;
};

static int open_dev(struct dev* d) {
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  d->ctx = list && n ? ibv_open_device(list[0]) : NULL;
  if (!d->ctx) return -1;
  d->pd = ibv_alloc_pd(d->ctx);
  d->ch = ibv_create_comp_channel(d->ctx);
  d->cq = d->ch ? ibv_create_cq(d->ctx, 64, NULL, d->ch, 0) : NULL;
  if (!d->pd || !d->cq) return -1;
  struct ibv_qp_init_attr a = {.send_cq = d->cq, .recv_cq = d->cq, .qp_type = IBV_QPT_UD,
                               .cap = {.max_send_wr = 64, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
  d->qp = ibv_create_qp(d->pd, &a);
  if (!d->qp) return -1;
  struct ibv_qp_attr m = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11111111};
  if (ibv_modify_qp(d->qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) return -1;
  m.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(d->qp, &m, IBV_QP_STATE)) return -1;
  m.qp_state = IBV_QPS_RTS;
  m.sq_psn = 0;
  if (ibv_modify_qp(d->qp, &m, IBV_QP_STATE | IBV_QP_SQ_PSN)) return -1;
  return ibv_query_gid(d->ctx, 1, 0, &d->gid);
}

// A child: receives one message in its registered memory, asleep until it
// comes, and checks it is the one meant for it. Exit 0 when intact.
static int target(int qpn_out, int index) {
  alarm(60);  // a message that never comes: the parent counts this child out
  struct dev d;
  if (open_dev(&d)) return perror("child: device"), 10;
  char* buf = calloc(1, kMsg + 40);  // room for the GRH a UD receive starts with
  struct ibv_mr* mr = ibv_reg_mr(d.pd, buf, kMsg + 40, IBV_ACCESS_LOCAL_WRITE);
  if (!mr) return perror("child: ibv_reg_mr"), 11;
  struct ibv_sge sge = {(uintptr_t)buf, kMsg + 40, mr->lkey};
  struct ibv_recv_wr wr = {.sg_list = &sge, .num_sge = 1}, *bad;
  if (ibv_post_recv(d.qp, &wr, &bad) || ibv_req_notify_cq(d.cq, 0)) return perror("child: post"), 12;
  uint32_t said[2] = {d.qp->qp_num, (uint32_t)index};  // (one write: atomic on a pipe)
  if (write(qpn_out, said, sizeof said) != sizeof said) return 13;
  close(qpn_out);
  struct ibv_wc wc;
  int got = 0;
  while (!got) {
    struct ibv_cq* ev_cq;
    void* ev_ctx;
    if (ibv_get_cq_event(d.ch, &ev_cq, &ev_ctx)) return perror("child: ibv_get_cq_event"), 14;
    ibv_ack_cq_events(ev_cq, 1);
    if (ibv_req_notify_cq(d.cq, 0)) return 15;
    got = ibv_poll_cq(d.cq, 1, &wc);
    if (got < 0) return 16;
  }
  char want[kMsg];
  snprintf(want, sizeof want, "to child %d", index);
  if (wc.status != IBV_WC_SUCCESS) return fprintf(stderr, "child %d: %s\n", index, ibv_wc_status_str(wc.status)), 17;
  return strcmp(buf + 40, want) == 0 ? 0 : (fprintf(stderr, "child %d got '%s'\n", index, buf + 40), 18);
}

static long status_kb(const char* field) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, field, strlen(field)) == 0) v = atol(line + strlen(field) + 1);
  if (f) fclose(f);
  return v;
}

static int count_fds(void) {
  DIR* d = opendir("/proc/self/fd");
  int n = 0;
  for (struct dirent* e; d && (e = readdir(d));) n += e->d_name[0] != '.';
  if (d) closedir(d);
  return n - 1;  // (the directory's own)
}

// Mappings of arenas (the memfds "softverbs-arena": our own, whole, and
// what we mapped of our peers'): how many, and their GiB in all. (Not
// VmSize: a sanitizer's shadow memory is tens of TiB of it.)
static int arena_mappings(long* gib) {
  FILE* f = fopen("/proc/self/maps", "r");
  char line[512];
  int n = 0;
  unsigned long long bytes = 0;
  while (f && fgets(line, sizeof line, f)) {
    unsigned long long lo, hi;
    if (!strstr(line, "softverbs-arena") || sscanf(line, "%llx-%llx", &lo, &hi) != 2) continue;
    ++n;
    bytes += hi - lo;
  }
  if (f) fclose(f);
  *gib = (long)(bytes >> 30);
  return n;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 0;
  if (n <= 0) return fprintf(stderr, "usage: %s <peers>\n", argv[0]), 2;
  int qpns[2];
  if (pipe(qpns)) return perror("pipe"), 1;
  pid_t* kids = calloc((size_t)n, sizeof(pid_t));
  for (int i = 0; i < n; ++i) {
    kids[i] = fork();
    if (kids[i] < 0) return perror("fork"), 1;
    if (kids[i] == 0) {
      close(qpns[0]);
      _exit(target(qpns[1], i));
    }
  }
  close(qpns[1]);
  // Each child's QPN and index, in the order they come up.
  uint32_t(*qpn)[2] = calloc((size_t)n, sizeof *qpn);
  int got = 0;
  while (got < n && read(qpns[0], qpn[got], sizeof *qpn) == sizeof *qpn) ++got;
  if (got < n) fprintf(stderr, "only %d of %d children came up\n", got, n);

  struct dev d;
  if (open_dev(&d)) return perror("parent: device"), 1;
  char* buf = calloc((size_t)n, kMsg);
  struct ibv_mr* mr = ibv_reg_mr(d.pd, buf, (size_t)n * kMsg, 0);
  struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .grh = {.dgid = d.gid, .sgid_index = 0, .hop_limit = 1}};
  struct ibv_ah* ah = mr ? ibv_create_ah(d.pd, &aa) : NULL;
  if (!ah) return perror("parent: mr/ah"), 1;
  int sent = 0, failed = 0, outstanding = 0;
  for (int i = 0; i < got; ++i) {
    snprintf(buf + i * kMsg, kMsg, "to child %u", qpn[i][1]);  // (each child checks it got its own)
    struct ibv_sge sge = {(uintptr_t)(buf + i * kMsg), kMsg, mr->lkey};
    struct ibv_send_wr wr = {.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED,
                             .wr.ud = {.ah = ah, .remote_qpn = qpn[i][0], .remote_qkey = 0x11111111}},
                       *bad;
    if (ibv_post_send(d.qp, &wr, &bad)) {
      ++failed;
      continue;
    }
    ++outstanding;
    while (outstanding >= 32 || (i == got - 1 && outstanding > 0)) {
      struct ibv_wc wc[8];
      int k = ibv_poll_cq(d.cq, 8, wc);
      for (int j = 0; j < k; ++j) wc[j].status == IBV_WC_SUCCESS ? ++sent : ++failed;
      outstanding -= k > 0 ? k : 0;
    }
  }
  int intact = 0;
  for (int i = 0; i < n; ++i) {
    int st = 0;
    waitpid(kids[i], &st, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) ++intact;
  }
  long arena_gib = 0;
  const int maps = arena_mappings(&arena_gib);
  printf("peers %d sent %d failed %d received_intact %d arena_gib %ld open_fds %d arena_mappings %d vm_size_gib %ld\n",
         n, sent, failed, intact, arena_gib, count_fds(), maps, status_kb("VmSize:") >> 20);
  return intact == n && sent == n ? 0 : 1;
}
