// rdma_migrate_id between hosts: cm_migrate_tool ADDRESS PORT connects an
// RC id made on channel A, moves it to channel B while its REQ waits for
// the REP, and must get ESTABLISHED and then DISCONNECTED on B, with A
// quiet. The process's CM mailbox and retry timer serve ids of every
// channel (src/rdmacm/cm_network.cpp): the migrated id's new channel must
// watch them, its old one no longer for it (net_migrate).
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void expect(struct rdma_event_channel* ch, enum rdma_cm_event_type type) {
  struct rdma_cm_event* ev;
  if (rdma_get_cm_event(ch, &ev) != 0) {
    perror("rdma_get_cm_event");
    exit(1);
  }
  printf("%s (status %d)\n", rdma_event_str(ev->event), ev->status);
  const int ok = ev->event == type && ev->status == 0;
  rdma_ack_cm_event(ev);
  if (!ok) {
    printf("expected %s\n", rdma_event_str(type));
    exit(1);
  }
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s ADDRESS PORT\n", argv[0]);
    return 2;
  }
  struct rdma_event_channel* a = rdma_create_event_channel();
  struct rdma_event_channel* b = rdma_create_event_channel();
  struct rdma_cm_id* id;
  struct addrinfo* ai;
  if (!a || !b || rdma_create_id(a, &id, NULL, RDMA_PS_TCP) != 0 || getaddrinfo(argv[1], argv[2], NULL, &ai) != 0) {
    perror("setup");
    return 1;
  }
  if (rdma_resolve_addr(id, NULL, ai->ai_addr, 2000) != 0) return perror("rdma_resolve_addr"), 1;
  expect(a, RDMA_CM_EVENT_ADDR_RESOLVED);
  if (rdma_resolve_route(id, 2000) != 0) return perror("rdma_resolve_route"), 1;
  expect(a, RDMA_CM_EVENT_ROUTE_RESOLVED);
  struct ibv_qp_init_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
  attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
  attr.qp_type = IBV_QPT_RC;
  if (rdma_create_qp(id, NULL, &attr) != 0) return perror("rdma_create_qp"), 1;
  struct rdma_conn_param param;
  memset(&param, 0, sizeof param);
  param.responder_resources = param.initiator_depth = 1;
  param.retry_count = param.rnr_retry_count = 7;
  if (rdma_connect(id, &param) != 0) return perror("rdma_connect"), 1;
  if (rdma_migrate_id(id, b) != 0) return perror("rdma_migrate_id"), 1;
  expect(b, RDMA_CM_EVENT_ESTABLISHED);
  if (rdma_disconnect(id) != 0) return perror("rdma_disconnect"), 1;
  expect(b, RDMA_CM_EVENT_DISCONNECTED);
  struct pollfd old = {a->fd, POLLIN, 0};
  if (poll(&old, 1, 100) != 0) {
    puts("the old channel is readable: it still watches for the migrated id");
    return 1;
  }
  rdma_destroy_qp(id);
  rdma_destroy_id(id);
  freeaddrinfo(ai);
  rdma_destroy_event_channel(a);
  rdma_destroy_event_channel(b);
  puts("migrated: OK");
  return 0;
}
