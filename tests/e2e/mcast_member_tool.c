// One process's multicast membership: a UD QP attached to a group, then
//   die      exit at once, leaving the membership behind (killed, crashed)
//   detach   detach and destroy everything, reporting each call's result
// The QP is the process's first, so its number is the same in every process
// that takes the same registry slot.
#include <infiniband/verbs.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 2 || (strcmp(argv[1], "die") && strcmp(argv[1], "detach"))) {
    fprintf(stderr, "usage: %s die|detach\n", argv[0]);
    return 2;
  }
  struct ibv_device** list = ibv_get_device_list(NULL);
  struct ibv_context* ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
  if (!ctx) return perror("open device"), 1;
  struct ibv_pd* pd = ibv_alloc_pd(ctx);
  struct ibv_cq* cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
  struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
                                .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
  struct ibv_qp* qp = pd && cq ? ibv_create_qp(pd, &ia) : NULL;
  if (!qp) return perror("create qp"), 1;
  union ibv_gid mgid = {.raw = {0xff, 0x0e, [14] = 0x12, [15] = 0x34}};
  int rc = ibv_attach_mcast(qp, &mgid, 0);
  printf("qpn %#x attach %d\n", qp->qp_num, rc);
  if (!strcmp(argv[1], "die")) _exit(rc ? 1 : 0);
  int detach = ibv_detach_mcast(qp, &mgid, 0);
  int destroy = ibv_destroy_qp(qp);
  int rest = ibv_destroy_cq(cq) | ibv_dealloc_pd(pd) | ibv_close_device(ctx);
  ibv_free_device_list(list);
  printf("detach %d destroy_qp %d (%s) rest %d\n", detach, destroy, destroy ? strerror(destroy) : "ok", rest);
  return rc || detach || destroy || rest ? 1 : 0;
}
