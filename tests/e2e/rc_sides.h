/* The two sides of an RC connection between two hosts, for the e2e tools
 * written against <infiniband/verbs.h> only (rc_buffer_tool.c,
 * read_depth_tool.c): each side writes its QPN, PSN, rkey, buffer address
 * and GID to DIR/<who> and reads the other's, then connects its QP; the
 * client says it is done with a SEND (tell_peer, await_peer). */
#pragma once

#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct side {
  uint32_t qpn, psn, rkey;
  uint64_t addr;
  union ibv_gid gid;
};

static inline double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static inline int write_side(const char *dir, const char *who, const struct side *s) {
  char path[512], tmp[520];
  snprintf(path, sizeof path, "%s/%s", dir, who);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return -1;
  fprintf(f, "%u %u %u %llu", s->qpn, s->psn, s->rkey, (unsigned long long)s->addr);
  for (int i = 0; i < 16; ++i) fprintf(f, " %u", s->gid.raw[i]);
  fprintf(f, "\n");
  fclose(f);
  return rename(tmp, path);
}

static inline int read_side(const char *dir, const char *who, struct side *s) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, who);
  for (double end = now_s() + 30; now_s() < end; usleep(10000)) {
    FILE *f = fopen(path, "r");
    if (!f) continue;
    unsigned long long addr;
    int n = fscanf(f, "%u %u %u %llu", &s->qpn, &s->psn, &s->rkey, &addr);
    for (int i = 0; i < 16 && n == 4; ++i) {
      unsigned v;
      if (fscanf(f, " %u", &v) != 1) n = -1;
      s->gid.raw[i] = (uint8_t)v;
    }
    fclose(f);
    s->addr = addr;
    return n == 4 ? 0 : -1;
  }
  return -1;
}

/* RESET -> RTS to `peer`, with remote `access` for the peer and an
 * initiator and responder depth of `rd_atomic` READs and atomics. */
static inline int connect_qp(struct ibv_context *ctx, struct ibv_qp *qp, int gid_index, const struct side *me,
                             const struct side *peer, unsigned access, uint8_t rd_atomic) {
  struct ibv_port_attr pa;
  if (ibv_query_port(ctx, 1, &pa)) return -1;
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qp_access_flags = access};
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) return -1;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = pa.active_mtu;
  a.dest_qp_num = peer->qpn;
  a.rq_psn = peer->psn;
  a.max_dest_rd_atomic = rd_atomic;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = peer->gid;
  a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return -1;
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = me->psn;
  a.timeout = 14; /* 67 ms, as perftest: a loaded CI machine may hold the peer off for ~30 ms */
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = rd_atomic;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                   IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

static inline int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc, double seconds) {
  for (double end = now_s() + seconds; now_s() < end;) {
    int n = ibv_poll_cq(cq, 1, wc);
    if (n < 0) return -1;
    if (n == 1) return 0;
  }
  return -1;
}

/* One host's resources: the first device, a PD, one CQ for both queues,
 * an RC QP, and a private anonymous buffer of `bytes` (zeroed) registered
 * with local write and `access`. */
struct rc_host {
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_cq *cq;
  struct ibv_qp *qp;
  uint8_t *buf;
  struct ibv_mr *mr;
};

/* The arguments every side takes, "server DIR GID_INDEX ..." or "client DIR
 * GID_INDEX ARG ...", into *server, *dir and *gid_index (stdout then line
 * buffered: the test reads it as it goes). 0, or 2 having printed
 * `usage` (what follows the program's name). */
static inline int side_args(int argc, char **argv, const char *usage, int *server, const char **dir,
                            int *gid_index) {
  if (argc < 4 || (!strcmp(argv[1], "client") && argc < 5)) {
    fprintf(stderr, "usage: %s %s\n", argv[0], usage);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  *server = !strcmp(argv[1], "server");
  *dir = argv[2];
  *gid_index = atoi(argv[3]);
  return 0;
}

/* 0, or -1 having said what failed. */
static inline int open_rc_host(struct rc_host *h, uint32_t max_send_wr, size_t bytes, unsigned access) {
  memset(h, 0, sizeof *h);
  struct ibv_device **list = ibv_get_device_list(NULL);
  h->ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
  h->pd = h->ctx ? ibv_alloc_pd(h->ctx) : NULL;
  h->cq = h->pd ? ibv_create_cq(h->ctx, (int)(2 * max_send_wr + 8), NULL, NULL, 0) : NULL;
  struct ibv_qp_init_attr ia = {.send_cq = h->cq, .recv_cq = h->cq, .qp_type = IBV_QPT_RC,
                                .cap = {.max_send_wr = max_send_wr, .max_recv_wr = 4, .max_send_sge = 1,
                                        .max_recv_sge = 1, .max_inline_data = 16}};
  h->qp = h->cq ? ibv_create_qp(h->pd, &ia) : NULL;
  void *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (!h->qp || buf == MAP_FAILED) {
    fprintf(stderr, "cannot create the device resources\n");
    return -1;
  }
  h->buf = (uint8_t *)buf;
  h->mr = ibv_reg_mr(h->pd, h->buf, bytes, IBV_ACCESS_LOCAL_WRITE | access);
  if (!h->mr) {
    perror("ibv_reg_mr");
    return -1;
  }
  return 0;
}

/* Tells the peer our side (as "server" or "client", starting at PSN `psn`),
 * reads its side into *peer and connects to it (connect_qp). 0, or -1
 * having said so. */
static inline int meet_peer(struct rc_host *h, const char *dir, int server, int gid_index, uint32_t psn,
                            struct side *peer, unsigned access, uint8_t rd_atomic) {
  struct side me = {.qpn = h->qp->qp_num, .psn = psn, .rkey = h->mr->rkey, .addr = (uintptr_t)h->buf};
  if (ibv_query_gid(h->ctx, 1, gid_index, &me.gid) || write_side(dir, server ? "server" : "client", &me) ||
      read_side(dir, server ? "client" : "server", peer) ||
      connect_qp(h->ctx, h->qp, gid_index, &me, peer, access, rd_atomic)) {
    fprintf(stderr, "cannot connect\n");
    return -1;
  }
  return 0;
}

/* The server's end of tell_peer: a receive into `at` (16 bytes of the
 * MR), "ready" on stdout (the test starts the client then), and the SEND
 * waited for, up to 60 s. 0 once it came; else the tools' exit status,
 * having said why: 3 (no receive could be posted) or 1 (no SEND came). */
static inline int await_peer(struct rc_host *h, uint8_t *at) {
  struct ibv_sge sge = {.addr = (uintptr_t)at, .length = 16, .lkey = h->mr->lkey};
  struct ibv_recv_wr rwr = {.sg_list = &sge, .num_sge = 1}, *bad;
  if (ibv_post_recv(h->qp, &rwr, &bad)) {
    fprintf(stderr, "ibv_post_recv failed\n");
    return 3;
  }
  printf("ready\n");
  struct ibv_wc wc;
  if (wait_wc(h->cq, &wc, 60) || wc.status != IBV_WC_SUCCESS) {
    fprintf(stderr, "no SEND from the client\n");
    return 1;
  }
  return 0;
}

/* A SEND of a few bytes that tells the peer we are done; 0 once it
 * completed successfully. */
static inline int tell_peer(struct rc_host *h) {
  char note[8] = "done";
  struct ibv_sge sge = {.addr = (uintptr_t)note, .length = sizeof note};
  struct ibv_send_wr wr = {.wr_id = 99, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
                           .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE}, *bad;
  struct ibv_wc wc;
  return ibv_post_send(h->qp, &wr, &bad) || wait_wc(h->cq, &wc, 30) || wc.status != IBV_WC_SUCCESS ? -1 : 0;
}
