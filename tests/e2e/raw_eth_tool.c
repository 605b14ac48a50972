/* A raw packet QP program for the network-namespace test (raw_netns.sh):
 *   raw_eth_tool send DST_MAC COUNT   sends COUNT frames (one with a VLAN tag)
 *   raw_eth_tool recv DST_MAC COUNT   steers frames for DST_MAC to its QP and
 *                                     checks COUNT of them, bytes and all
 *   raw_eth_tool loop DST_MAC COUNT   both, in two contexts of one process
 * The interface is SOFTVERBS_NETDEV. Written against <infiniband/verbs.h>
 * only, as any raw Ethernet application is. */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ETHER_TYPE 0x88b5
#define SLOT 2048

static int parse_mac(const char *s, uint8_t *mac) {
  return sscanf(s, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &mac[0], &mac[1], &mac[2], &mac[3], &mac[4], &mac[5]) == 6;
}

/* Frame i: to `dst`, payload of 64 + i bytes of a pattern; frame 0 carries
 * an 802.1Q tag (VID 5). */
static size_t make_frame(uint8_t *f, const uint8_t *dst, int i) {
  size_t n = 0;
  memcpy(f, dst, 6);
  const uint8_t src[6] = {0x02, 0x5e, 0x00, 0x00, 0x00, 0x01};
  memcpy(f + 6, src, 6);
  n = 12;
  if (i == 0) {
    f[n++] = 0x81, f[n++] = 0x00, f[n++] = 0x00, f[n++] = 0x05;
  }
  f[n++] = ETHER_TYPE >> 8, f[n++] = ETHER_TYPE & 0xff;
  for (int k = 0; k < 64 + i; ++k) f[n++] = (uint8_t)(i * 31 + k);
  return n;
}

static int wait_one(struct ibv_cq *cq, struct ibv_wc *wc) {
  for (int spins = 0; spins < 5000; ++spins) {
    int n = ibv_poll_cq(cq, 1, wc);
    if (n) return n;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  return 0;
}

/* One raw packet QP with its own context (a NIC's "user context"), PD, CQ
 * and 64 slots of 2 KiB registered. */
struct side {
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_cq *cq;
  struct ibv_qp *qp;
  struct ibv_mr *mr;
  struct ibv_flow *flow;
  uint8_t buf[64 * SLOT];
};

static int open_side(struct side *sd) {
  struct ibv_device **list = ibv_get_device_list(NULL);
  sd->ctx = list ? ibv_open_device(list[0]) : NULL;
  ibv_free_device_list(list);
  sd->pd = sd->ctx ? ibv_alloc_pd(sd->ctx) : NULL;
  sd->cq = sd->pd ? ibv_create_cq(sd->ctx, 64, NULL, NULL, 0) : NULL;
  if (!sd->cq) return 3;
  struct ibv_qp_init_attr attr = {.send_cq = sd->cq, .recv_cq = sd->cq, .qp_type = IBV_QPT_RAW_PACKET,
                                  .cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1}};
  sd->qp = ibv_create_qp(sd->pd, &attr);
  if (!sd->qp) {
    perror("ibv_create_qp(RAW_PACKET)");
    return 4;
  }
  struct ibv_qp_attr m = {.qp_state = IBV_QPS_INIT, .port_num = 1};
  if (ibv_modify_qp(sd->qp, &m, IBV_QP_STATE | IBV_QP_PORT)) return 5;
  m.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(sd->qp, &m, IBV_QP_STATE)) return 5;
  m.qp_state = IBV_QPS_RTS;
  if (ibv_modify_qp(sd->qp, &m, IBV_QP_STATE)) return 5;
  sd->mr = ibv_reg_mr(sd->pd, sd->buf, sizeof sd->buf, IBV_ACCESS_LOCAL_WRITE);
  return sd->mr ? 0 : 6;
}

static void close_side(struct side *sd) {
  if (sd->flow) ibv_destroy_flow(sd->flow);
  ibv_destroy_qp(sd->qp);
  ibv_dereg_mr(sd->mr);
  ibv_destroy_cq(sd->cq);
  ibv_dealloc_pd(sd->pd);
  ibv_close_device(sd->ctx);
}

/* Receives posted in every slot and a flow steering frames for `dst` here. */
static int steer_here(struct side *sd, const uint8_t *dst) {
  for (int i = 0; i < 64; ++i) {
    struct ibv_sge s = {(uintptr_t)(sd->buf + i * SLOT), SLOT, sd->mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1}, *bad;
    if (ibv_post_recv(sd->qp, &wr, &bad)) return 7;
  }
  struct {
    struct ibv_flow_attr attr;
    struct ibv_flow_spec_eth eth;
  } __attribute__((packed, aligned(8))) fl = {.attr = {.type = IBV_FLOW_ATTR_NORMAL, .size = sizeof fl, .num_of_specs = 1, .port = 1},
                                  .eth = {.type = IBV_FLOW_SPEC_ETH, .size = sizeof(struct ibv_flow_spec_eth)}};
  memcpy(fl.eth.val.dst_mac, dst, 6);
  memset(fl.eth.mask.dst_mac, 0xff, 6);
  void *fl_attr = &fl; /* packed, as the spec list must be */
  sd->flow = ibv_create_flow(sd->qp, fl_attr);
  if (!sd->flow) {
    perror("ibv_create_flow");
    return 8;
  }
  return 0;
}

/* Checks `count` frames arriving, bytes and all: 0 or an exit code. */
static int receive_frames(struct side *sd, const uint8_t *dst, int count) {
  uint8_t want[SLOT];
  int seen = 0;
  while (seen < count) {
    struct ibv_wc wc;
    if (!wait_one(sd->cq, &wc)) {
      fprintf(stderr, "timed out after %d of %d frames\n", seen, count);
      return 9;
    }
    if (wc.status != IBV_WC_SUCCESS) return 10;
    const uint8_t *got = sd->buf + wc.wr_id * SLOT;
    /* Which frame is it: its payload's first byte says (i * 31), tag or not. */
    int i = got[12] == 0x81 ? 0 : -1;
    for (int k = 1; i < 0 && k < count; ++k)
      if (got[14] == (uint8_t)(k * 31) && wc.byte_len == 14 + 64 + (uint32_t)k) i = k;
    size_t n = make_frame(want, dst, i < 0 ? 0 : i);
    if (i < 0 || wc.byte_len != n || memcmp(got, want, n)) {
      fprintf(stderr, "frame %d (%u bytes) is not what was sent\n", i, wc.byte_len);
      return 11;
    }
    ++seen;
  }
  printf("received %d frames intact\n", seen);
  return 0;
}

static int send_frames(struct side *sd, const uint8_t *dst, int count) {
  static uint8_t frame[SLOT];
  struct ibv_mr *mr = ibv_reg_mr(sd->pd, frame, sizeof frame, 0);
  if (!mr) return 6;
  for (int i = 0; i < count; ++i) {
    size_t n = make_frame(frame, dst, i);
    struct ibv_sge s = {(uintptr_t)frame, (uint32_t)n, mr->lkey};
    struct ibv_send_wr wr = {.wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED}, *bad;
    struct ibv_wc wc;
    if (ibv_post_send(sd->qp, &wr, &bad) || !wait_one(sd->cq, &wc) || wc.status != IBV_WC_SUCCESS) return 12;
  }
  ibv_dereg_mr(mr);
  printf("sent %d frames\n", count);
  return 0;
}

int main(int argc, char **argv) {
  uint8_t dst[6];
  if (argc != 4 || !parse_mac(argv[2], dst)) {
    fprintf(stderr, "usage: %s send|recv|loop DST_MAC COUNT\n", argv[0]);
    return 2;
  }
  const int count = atoi(argv[3]);
  static struct side a, b;
  int rc = open_side(&a);
  if (rc) return rc;
  if (!strcmp(argv[1], "recv")) {
    if ((rc = steer_here(&a, dst))) return rc;
    printf("ready\n");
    fflush(stdout);
    rc = receive_frames(&a, dst, count);
  } else if (!strcmp(argv[1], "send")) {
    rc = send_frames(&a, dst, count);
  } else {
    /* Local loopback, as a NIC with two user contexts open does it: what
     * context a sends, a flow of context b gets; a's own QP, whose flow
     * matches too, does not get its own frames back. */
    if ((rc = open_side(&b)) || (rc = steer_here(&b, dst)) || (rc = steer_here(&a, dst))) return rc;
    if ((rc = send_frames(&a, dst, count)) || (rc = receive_frames(&b, dst, count))) return rc;
    struct ibv_wc wc;
    for (int i = 0; i < 100; ++i) {
      struct timespec ms = {0, 1000000};
      if (ibv_poll_cq(a.cq, 1, &wc)) {
        fprintf(stderr, "the sending context received its own frame back\n");
        return 13;
      }
      nanosleep(&ms, NULL);
    }
    printf("the sender's own flow got none back\n");
    close_side(&b);
  }
  close_side(&a);
  return rc;
}
