/*
 * softverbs demo: a server and a client process talk RDMA over an RC queue
 * pair, through plain verbs calls, and print what happens:
 *   1. the client SENDs a message into a receive buffer the server posted;
 *   2. the client RDMA WRITEs into the server's memory, then SENDs with an
 *      immediate value to tell it so;
 *   3. the client RDMA READs from the server's memory;
 *   4. the client uses a wrong rkey and gets a remote access error.
 * The two exchange their QP number, GID and buffer address/rkey over TCP.
 *
 *   softverbs_demo server PORT
 *   softverbs_demo client PORT
 */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF_SIZE 4096

struct endpoint {
  uint32_t qpn;
  union ibv_gid gid;
  uint64_t addr;
  uint32_t rkey;
};

struct node {
  const char *role;
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_cq *cq;
  struct ibv_qp *qp;
  struct ibv_mr *mr;
  char *buf;
  int gid_index;
};

static void die(const char *what) {
  perror(what);
  exit(1);
}

static int find_loopback_gid(struct ibv_context *ctx) {
  union ibv_gid want = {0}, gid;
  want.raw[10] = want.raw[11] = 0xff;
  inet_pton(AF_INET, "127.0.0.1", want.raw + 12);
  for (int i = 0; i < 128; i++)
    if (ibv_query_gid(ctx, 1, i, &gid) == 0 && memcmp(&gid, &want, sizeof gid) == 0) return i;
  return -1;
}

static void setup(struct node *n) {
  struct ibv_device **list = ibv_get_device_list(NULL);
  if (!list || !list[0]) die("ibv_get_device_list");
  n->ctx = ibv_open_device(list[0]);
  if (!n->ctx) die("ibv_open_device");
  printf("[%s] opened device %s\n", n->role, ibv_get_device_name(list[0]));
  ibv_free_device_list(list);
  n->gid_index = find_loopback_gid(n->ctx);
  n->pd = ibv_alloc_pd(n->ctx);
  n->cq = ibv_create_cq(n->ctx, 16, NULL, NULL, 0);
  n->buf = aligned_alloc(4096, BUF_SIZE);
  memset(n->buf, 0, BUF_SIZE);
  n->mr = ibv_reg_mr(n->pd, n->buf, BUF_SIZE,
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  struct ibv_qp_init_attr ia = {.send_cq = n->cq, .recv_cq = n->cq, .qp_type = IBV_QPT_RC,
                                .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1}};
  n->qp = ibv_create_qp(n->pd, &ia);
  if (!n->pd || !n->cq || !n->mr || !n->qp || n->gid_index < 0) die("setup");
  printf("[%s] QP 0x%06x, 4 KiB buffer at %p registered with rkey 0x%08x\n", n->role, n->qp->qp_num,
         (void *)n->buf, n->mr->rkey);
}

static void connect_qp(struct node *n, const struct endpoint *peer) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
                          .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
  if (ibv_modify_qp(n->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    die("INIT");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = peer->qpn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.dgid = peer->gid;
  a.ah_attr.grh.sgid_index = n->gid_index;
  a.ah_attr.grh.hop_limit = 64;
  if (ibv_modify_qp(n->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    die("RTR");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  if (ibv_modify_qp(n->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                   IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
    die("RTS");
  printf("[%s] QP connected to remote QP 0x%06x (RESET -> INIT -> RTR -> RTS)\n", n->role, peer->qpn);
}

static struct ibv_wc wait_completion(struct node *n) {
  struct ibv_wc wc;
  while (ibv_poll_cq(n->cq, 1, &wc) == 0) {
  }
  return wc;
}

static void post_recv(struct node *n, size_t off, uint32_t len) {
  struct ibv_sge sge = {(uintptr_t)(n->buf + off), len, n->mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = off, .sg_list = &sge, .num_sge = 1}, *bad;
  if (ibv_post_recv(n->qp, &wr, &bad)) die("ibv_post_recv");
}

static struct ibv_wc post_send(struct node *n, enum ibv_wr_opcode op, size_t off, uint32_t len,
                               const struct endpoint *peer, uint64_t remote_off, uint32_t rkey, uint32_t imm) {
  struct ibv_sge sge = {(uintptr_t)(n->buf + off), len, n->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = op, .sg_list = &sge, .num_sge = 1, .opcode = op,
                           .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(imm)},
                     *bad;
  wr.wr.rdma.remote_addr = peer->addr + remote_off;
  wr.wr.rdma.rkey = rkey;
  if (ibv_post_send(n->qp, &wr, &bad)) die("ibv_post_send");
  return wait_completion(n);
}

static int tcp(const char *role, int port) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (!strcmp(role, "server")) {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, 1)) die("listen");
    int c = accept(fd, NULL, NULL);
    close(fd);
    return c;
  }
  for (int i = 0; i < 100; i++) {
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) return fd;
    usleep(50000);
  }
  die("connect");
  return -1;
}

static void exchange(int fd, const struct endpoint *mine, struct endpoint *theirs) {
  if (write(fd, mine, sizeof *mine) != sizeof *mine || read(fd, theirs, sizeof *theirs) != sizeof *theirs)
    die("exchange");
}

static void sync_point(int fd) {
  char b = 0;
  if (write(fd, &b, 1) != 1 || read(fd, &b, 1) != 1) die("sync");
}

int main(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
    fprintf(stderr, "usage: %s server|client PORT\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct node n = {.role = argv[1]};
  int server = !strcmp(argv[1], "server");
  setup(&n);
  struct endpoint mine = {n.qp->qp_num, {{0}}, (uintptr_t)n.buf, n.mr->rkey}, peer;
  ibv_query_gid(n.ctx, 1, n.gid_index, &mine.gid);
  int fd = tcp(argv[1], atoi(argv[2]));
  exchange(fd, &mine, &peer);
  connect_qp(&n, &peer);
  if (server) { /* receives can be posted once the QP has left RESET */
    post_recv(&n, 0, 256);  /* for the SEND */
    post_recv(&n, 256, 0);  /* for the SEND_WITH_IMM that follows the WRITE */
    strcpy(n.buf + 2048, "server memory, fetched by RDMA READ");
  }
  sync_point(fd);

  if (server) {
    struct ibv_wc wc = wait_completion(&n);
    printf("[server] receive completion: %s, %u bytes from QP 0x%06x: \"%s\"\n", ibv_wc_status_str(wc.status),
           wc.byte_len, wc.src_qp, n.buf);
    wc = wait_completion(&n);
    printf("[server] receive completion: immediate %u (%s); my buffer at +1024 now holds \"%s\"\n",
           ntohl(wc.imm_data), ibv_wc_status_str(wc.status), n.buf + 1024);
    sync_point(fd); /* the client reads and fails while we wait */
    sync_point(fd);
    printf("[server] done\n");
  } else {
    strcpy(n.buf, "hello from the client, by SEND");
    struct ibv_wc wc = post_send(&n, IBV_WR_SEND, 0, strlen(n.buf) + 1, &peer, 0, 0, 0);
    printf("[client] SEND completed: %s\n", ibv_wc_status_str(wc.status));
    strcpy(n.buf + 512, "written by the client with RDMA WRITE");
    wc = post_send(&n, IBV_WR_RDMA_WRITE, 512, strlen(n.buf + 512) + 1, &peer, 1024, peer.rkey, 0);
    printf("[client] RDMA WRITE to server %p+1024 (rkey 0x%08x): %s\n", (void *)peer.addr, peer.rkey,
           ibv_wc_status_str(wc.status));
    wc = post_send(&n, IBV_WR_SEND_WITH_IMM, 0, 0, &peer, 0, 0, 42);
    printf("[client] SEND_WITH_IMM 42 completed: %s\n", ibv_wc_status_str(wc.status));
    sync_point(fd);
    wc = post_send(&n, IBV_WR_RDMA_READ, 3072, 64, &peer, 2048, peer.rkey, 0);
    printf("[client] RDMA READ from server %p+2048: %s: \"%s\"\n", (void *)peer.addr, ibv_wc_status_str(wc.status),
           n.buf + 3072);
    wc = post_send(&n, IBV_WR_RDMA_WRITE, 512, 8, &peer, 0, peer.rkey ^ 0x5a5a00, 0);
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qia;
    ibv_query_qp(n.qp, &qa, IBV_QP_STATE, &qia);
    printf("[client] RDMA WRITE with a wrong rkey: %s; QP is now %s\n", ibv_wc_status_str(wc.status),
           qa.qp_state == IBV_QPS_ERR ? "in the error state" : "NOT in the error state (bug)");
    sync_point(fd);
    printf("[client] done\n");
  }
  close(fd);
  ibv_destroy_qp(n.qp);
  ibv_dereg_mr(n.mr);
  ibv_destroy_cq(n.cq);
  ibv_dealloc_pd(n.pd);
  ibv_close_device(n.ctx);
  free(n.buf);
  return 0;
}
