/* The port MTU test's program (port_mtu_netns.sh), written against
 * <infiniband/verbs.h> only:
 *   port_mtu_tool port       for each line read on stdin, queries port 1 and
 *                            prints "active_mtu BYTES max_mtu BYTES"
 *   port_mtu_tool recv MS    a UD QP (Q_Key 0x11111111): prints "qpn N",
 *                            then "received LEN" for each message that
 *                            arrives within MS milliseconds
 *   port_mtu_tool send SGID_INDEX DGID QPN LEN...
 *                            sends one UD message of each LEN to QPN at
 *                            DGID, one after the other, and prints
 *                            "sent LEN: STATUS" for each completion; exits
 *                            0 when every one completed successfully */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define QKEY 0x11111111u
#define GRH 40
#define SLOT (8192 + GRH)
#define RECVS 16

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int to_rts(struct ibv_qp *qp) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = QKEY};
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) return -1;
  a.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE)) return -1;
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s port | recv MS | send SGID_INDEX DGID QPN LEN...\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct ibv_device **list = ibv_get_device_list(NULL);
  struct ibv_context *ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
  if (!ctx) {
    fprintf(stderr, "no device\n");
    return 3;
  }
  if (!strcmp(argv[1], "port")) {
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
      struct ibv_port_attr pa;
      if (ibv_query_port(ctx, 1, &pa)) return 4;
      printf("active_mtu %d max_mtu %d\n", 128 << pa.active_mtu, 128 << pa.max_mtu);
    }
    return 0;
  }
  struct ibv_pd *pd = ibv_alloc_pd(ctx);
  struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 2 * RECVS, NULL, NULL, 0) : NULL;
  static char buf[RECVS * SLOT];
  struct ibv_mr *mr = cq ? ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE) : NULL;
  struct ibv_qp_init_attr init = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
                                  .cap = {.max_send_wr = 4, .max_recv_wr = RECVS, .max_send_sge = 1, .max_recv_sge = 1}};
  struct ibv_qp *qp = mr ? ibv_create_qp(pd, &init) : NULL;
  if (!qp || to_rts(qp)) {
    fprintf(stderr, "no UD QP\n");
    return 3;
  }
  if (!strcmp(argv[1], "recv") && argc == 3) {
    for (int i = 0; i < RECVS; ++i) {
      struct ibv_sge sge = {(uintptr_t)(buf + i * SLOT), SLOT, mr->lkey};
      struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1}, *bad;
      if (ibv_post_recv(qp, &wr, &bad)) return 4;
    }
    printf("qpn %u\n", qp->qp_num);
    const double end = now_ms() + atoi(argv[2]);
    while (now_ms() < end) {
      struct ibv_wc wc;
      int n = ibv_poll_cq(cq, 1, &wc);
      if (n < 0) return 4;
      if (n == 0) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
        continue;
      }
      if (wc.status != IBV_WC_SUCCESS) {
        printf("receive failed: %s\n", ibv_wc_status_str(wc.status));
        return 1;
      }
      printf("received %u\n", wc.byte_len - GRH);
    }
    return 0;
  }
  if (!strcmp(argv[1], "send") && argc >= 6) {
    struct ibv_ah_attr ah_attr = {.is_global = 1, .port_num = 1};
    ah_attr.grh.sgid_index = (uint8_t)atoi(argv[2]);
    ah_attr.grh.hop_limit = 64;
    if (inet_pton(AF_INET6, argv[3], ah_attr.grh.dgid.raw) != 1) {
      fprintf(stderr, "bad GID %s\n", argv[3]);
      return 2;
    }
    struct ibv_ah *ah = ibv_create_ah(pd, &ah_attr);
    if (!ah) {
      perror("ibv_create_ah");
      return 3;
    }
    const uint32_t qpn = (uint32_t)strtoul(argv[4], NULL, 0);
    int failed = 0;
    for (int i = 5; i < argc; ++i) {
      const uint32_t len = (uint32_t)atoi(argv[i]);
      if (len > 8192) return 2;
      memset(buf, 0x5a, len);
      struct ibv_sge sge = {(uintptr_t)buf, len, mr->lkey};
      struct ibv_send_wr wr = {.wr_id = len, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
                               .send_flags = IBV_SEND_SIGNALED},
                         *bad;
      wr.wr.ud.ah = ah;
      wr.wr.ud.remote_qpn = qpn;
      wr.wr.ud.remote_qkey = QKEY;
      if (ibv_post_send(qp, &wr, &bad)) {
        perror("ibv_post_send");
        return 4;
      }
      struct ibv_wc wc;
      int n = 0;
      const double end = now_ms() + 5000;
      while ((n = ibv_poll_cq(cq, 1, &wc)) == 0 && now_ms() < end) {
      }
      if (n != 1) {
        printf("sent %u: no completion\n", len);
        return 1;
      }
      printf("sent %u: %s\n", len, ibv_wc_status_str(wc.status));
      failed |= wc.status != IBV_WC_SUCCESS;
      struct timespec gap = {0, 50000000};  /* keep them apart: one at a time on the wire */
      nanosleep(&gap, NULL);
    }
    return failed;
  }
  fprintf(stderr, "bad arguments\n");
  return 2;
}
