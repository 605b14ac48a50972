// An all-to-all wire-up over rdma_cm among the processes of one host (issue
// 39, item 4): COUNT members, each listening on FIRST_PORT + its index,
// each connecting an RC QP to every member after it and accepting one from
// every member before it, all at once on one event channel. Then each sends
// its index over every connection and checks that every other member's
// arrived. Run it below RLIMIT_NOFILE COUNT to show that a process's
// connections to other processes of its host cost no descriptor each.
//   cm_mesh_tool COUNT ADDR FIRST_PORT
// Exit 0 when every member saw all COUNT - 1 messages; each failure says
// which member and what.
#include <errno.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>
#include <arpa/inet.h>

static int count, me;
static struct ibv_pd* pd;
static struct ibv_cq* cq;
static struct ibv_comp_channel* comp;
static uint32_t* inbox;  // one receive buffer a connection
static uint32_t outbox;
static struct ibv_mr *in_mr, *out_mr;
static int established;

#define FAIL(...) (fprintf(stderr, "member %d: ", me), fprintf(stderr, __VA_ARGS__), fputc('\n', stderr), exit(1))

static void ensure_verbs(struct ibv_context* verbs) {
  if (pd) return;
  pd = ibv_alloc_pd(verbs);
  comp = ibv_create_comp_channel(verbs);
  cq = comp ? ibv_create_cq(verbs, 2 * count, NULL, comp, 0) : NULL;
  inbox = calloc((size_t)count, sizeof *inbox);
  if (!pd || !cq || !inbox) FAIL("verbs: %s", strerror(errno));
  in_mr = ibv_reg_mr(pd, inbox, (size_t)count * sizeof *inbox, IBV_ACCESS_LOCAL_WRITE);
  out_mr = ibv_reg_mr(pd, &outbox, sizeof outbox, 0);
  if (!in_mr || !out_mr || ibv_req_notify_cq(cq, 0)) FAIL("reg_mr: %s", strerror(errno));
}

// A QP for the connection with member `peer`, its receive posted.
static void make_qp(struct rdma_cm_id* id, int peer) {
  ensure_verbs(id->verbs);
  struct ibv_qp_init_attr a;
  memset(&a, 0, sizeof a);
  a.qp_type = IBV_QPT_RC;
  a.send_cq = a.recv_cq = cq;
  a.cap.max_send_wr = a.cap.max_recv_wr = 2;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.sq_sig_all = 1;
  if (rdma_create_qp(id, pd, &a)) FAIL("rdma_create_qp: %s", strerror(errno));
  if (rdma_post_recv(id, (void*)(intptr_t)peer, &inbox[peer], sizeof inbox[peer], in_mr))
    FAIL("post_recv: %s", strerror(errno));
}

static struct sockaddr_in address_of(const char* addr, int port) {
  struct sockaddr_in sin;
  memset(&sin, 0, sizeof sin);
  sin.sin_family = AF_INET;
  sin.sin_port = htons((uint16_t)port);
  inet_pton(AF_INET, addr, &sin.sin_addr);
  return sin;
}

static int member(const char* addr, int first_port, int ready_fd, int go_fd) {
  struct rdma_event_channel* ch = rdma_create_event_channel();
  struct rdma_cm_id* listener;
  if (!ch || rdma_create_id(ch, &listener, NULL, RDMA_PS_TCP)) FAIL("rdma_create_id: %s", strerror(errno));
  struct sockaddr_in own = address_of(addr, first_port + me);
  if (rdma_bind_addr(listener, (struct sockaddr*)&own) || rdma_listen(listener, count))
    FAIL("listen: %s", strerror(errno));
  // Everyone listens before anyone connects.
  char byte = 1;
  if (write(ready_fd, &byte, 1) != 1 || read(go_fd, &byte, 1) != 0) FAIL("the start");
  close(ready_fd);
  close(go_fd);
  struct rdma_cm_id** ids = calloc((size_t)count, sizeof *ids);
  for (int peer = me + 1; peer < count; ++peer) {
    struct sockaddr_in to = address_of(addr, first_port + peer);
    if (rdma_create_id(ch, &ids[peer], (void*)(intptr_t)peer, RDMA_PS_TCP) ||
        rdma_resolve_addr(ids[peer], NULL, (struct sockaddr*)&to, 5000))
      FAIL("resolve %d: %s", peer, strerror(errno));
  }
  while (established < count - 1) {
    struct rdma_cm_event* ev;
    if (rdma_get_cm_event(ch, &ev)) FAIL("rdma_get_cm_event: %s", strerror(errno));
    struct rdma_cm_id* id = ev->id;
    const int peer = (int)(intptr_t)id->context;
    switch (ev->event) {
      case RDMA_CM_EVENT_ADDR_RESOLVED:
        if (rdma_resolve_route(id, 5000)) FAIL("resolve_route %d: %s", peer, strerror(errno));
        break;
      case RDMA_CM_EVENT_ROUTE_RESOLVED: {
        make_qp(id, peer);
        struct rdma_conn_param param;
        memset(&param, 0, sizeof param);
        param.private_data = &me;
        param.private_data_len = sizeof me;
        param.retry_count = param.rnr_retry_count = 7;
        if (rdma_connect(id, &param)) FAIL("rdma_connect %d: %s", peer, strerror(errno));
        break;
      }
      case RDMA_CM_EVENT_CONNECT_REQUEST: {
        int from;
        memcpy(&from, ev->param.conn.private_data, sizeof from);
        if (from < 0 || from >= me) FAIL("a request from %d", from);
        id->context = (void*)(intptr_t)from;
        ids[from] = id;
        make_qp(id, from);
        if (rdma_accept(id, NULL)) FAIL("rdma_accept %d: %s", from, strerror(errno));
        break;
      }
      case RDMA_CM_EVENT_ESTABLISHED:
        ++established;
        break;
      default:
        FAIL("%s with member %d (status %d)", rdma_event_str(ev->event), peer, ev->status);
    }
    rdma_ack_cm_event(ev);
  }
  outbox = (uint32_t)me;
  for (int peer = 0; peer < count; ++peer)
    if (peer != me && rdma_post_send(ids[peer], NULL, &outbox, sizeof outbox, out_mr, 0))
      FAIL("post_send %d: %s", peer, strerror(errno));
  int sends = 0, received = 0;
  while (sends < count - 1 || received < count - 1) {
    struct ibv_wc wc;
    int n = ibv_poll_cq(cq, 1, &wc);
    if (n < 0) FAIL("poll_cq");
    if (n == 0) {
      struct ibv_cq* ev_cq;
      void* ctx;
      if (ibv_get_cq_event(comp, &ev_cq, &ctx)) FAIL("get_cq_event");
      ibv_ack_cq_events(ev_cq, 1);
      if (ibv_req_notify_cq(cq, 0)) FAIL("req_notify");
      continue;
    }
    if (wc.status != IBV_WC_SUCCESS) FAIL("%s", ibv_wc_status_str(wc.status));
    if (wc.opcode == IBV_WC_SEND) {
      ++sends;
    } else {
      const int peer = (int)wc.wr_id;
      if (inbox[peer] != (uint32_t)peer) FAIL("member %d sent %u", peer, inbox[peer]);
      ++received;
    }
  }
  printf("member %d: %d connections, %d messages\n", me, established, received);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: cm_mesh_tool COUNT ADDR FIRST_PORT\n");
    return 2;
  }
  count = atoi(argv[1]);
  const int first_port = atoi(argv[3]);
  int ready[2], go[2];
  if (count < 2 || pipe(ready) || pipe(go)) return 2;
  pid_t* kids = calloc((size_t)count, sizeof *kids);
  for (me = 0; me < count; ++me) {
    kids[me] = fork();
    if (kids[me] == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      close(ready[0]);
      close(go[1]);
      setvbuf(stdout, NULL, _IOLBF, 0);
      exit(member(argv[2], first_port, ready[1], go[0]));
    }
  }
  close(ready[1]);
  close(go[0]);
  char byte;
  for (int i = 0; i < count; ++i)
    if (read(ready[0], &byte, 1) != 1) {
      fprintf(stderr, "a member did not start\n");
      break;
    }
  close(go[1]);  // all listen: go
  int failed = 0;
  for (int i = 0; i < count; ++i) {
    int status;
    if (waitpid(kids[i], &status, 0) != kids[i] || !WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  printf("%d of %d members failed\n", failed, count);
  return failed ? 1 : 0;
}
