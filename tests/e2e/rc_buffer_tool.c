/* The program of roce_buffers_netns.sh, written against <infiniband/verbs.h>
 * only: an RC WRITE of a large buffer between two hosts, whose buffer the
 * client gives up while the WRITE is still on the wire, as an application
 * may once the rules allow it. Over RoCEv2, softverbs reads a message's
 * payload from the application's memory as its packets go (no copy at post
 * time), so it must let go of that memory in time.
 *   rc_buffer_tool server DIR GID_INDEX [range|unmapped]
 *       a 16 MiB target buffer; writes DIR/server, waits for DIR/client,
 *       connects; on the client's SEND checks that every byte of the
 *       buffer is 0xa5 ("verified") and exits 0, else 1
 *       range: waits instead for IBV_EVENT_QP_ACCESS_ERR and checks that
 *       not one byte of the buffer was written
 *       unmapped: unmaps the (still registered) buffer before the client
 *       writes; the WRITE and the SEND must still land ("survived"), in
 *       the pages the MR holds, as on a NIC
 *   rc_buffer_tool client DIR GID_INDEX MODE
 *       MODE dereg: registers a 16 MiB buffer of 0xa5, posts one WRITE of
 *       it, deregisters the MR at once, fills the buffer with 0x5a and
 *       unmaps it; the WRITE must complete successfully (the server then
 *       checks it got 0xa5 throughout), then a SEND tells the server
 *       MODE flush: posts the WRITE, moves the QP to the error state, takes
 *       the flush completion, unmaps the (still registered) buffer and
 *       waits a second, through several ACK timeouts: nothing may read it
 *       MODE range: posts a WRITE of 16 MiB 4 KiB into the server's MR, so
 *       its last 4 KiB fall outside: it must complete with
 *       IBV_WC_REM_ACCESS_ERR, and the server's memory stay untouched (the
 *       responder checks the range its first packet names, before placing
 *       any packet's payload)
 *       MODE unmap: posts the WRITE and unmaps the buffer at once without
 *       deregistering it (an application bug a NIC survives: it reads the
 *       pinned pages); the WRITE must complete successfully with the bytes
 *       the buffer had, then a SEND tells the server
 *   Exits 0 on success; prints what went wrong otherwise. */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "rc_sides.h"

#define LEN (16u << 20)
#define PATTERN 0xa5
#define OVERWRITE 0x5a

int main(int argc, char **argv) {
  int server, gid_index;
  const char *dir;
  if (side_args(argc, argv, "server DIR GID_INDEX [range|unmapped] | client DIR GID_INDEX dereg|flush|range|unmap",
                &server, &dir, &gid_index))
    return 2;
  struct rc_host h;
  if (open_rc_host(&h, 4, LEN, IBV_ACCESS_REMOTE_WRITE)) return 3;
  struct ibv_context *ctx = h.ctx;
  struct ibv_cq *cq = h.cq;
  struct ibv_qp *qp = h.qp;
  struct ibv_mr *mr = h.mr;
  uint8_t *buf = h.buf;
  memset(buf, server ? 0 : PATTERN, LEN);
  struct side peer;
  if (meet_peer(&h, dir, server, gid_index, 0x1234, &peer, IBV_ACCESS_REMOTE_WRITE, 1)) return 3;
  struct ibv_wc wc;
  if (server && argc > 4 && !strcmp(argv[4], "range")) {
    printf("ready\n");
    struct pollfd pfd = {.fd = ctx->async_fd, .events = POLLIN};
    struct ibv_async_event ev;
    if (poll(&pfd, 1, 60000) != 1 || ibv_get_async_event(ctx, &ev)) {
      printf("no async event\n");
      return 1;
    }
    printf("async event: %s\n", ibv_event_type_str(ev.event_type));
    ibv_ack_async_event(&ev);
    if (ev.event_type != IBV_EVENT_QP_ACCESS_ERR) return 1;
    for (size_t i = 0; i < LEN; ++i)
      if (buf[i] != 0) {
        printf("byte %zu was written (0x%02x) by a WRITE that was refused\n", i, buf[i]);
        return 1;
      }
    printf("untouched\n");
    return 0;
  }
  const int unmapped = server && argc > 4 && !strcmp(argv[4], "unmapped");
  if (unmapped) munmap(buf, LEN); /* still registered: the MR holds its pages */
  if (server) {
    const int waited = await_peer(&h, buf);
    if (waited) return waited;
    if (unmapped) {
      printf("survived\n");
      return 0;
    }
    for (size_t i = 16; /* (the SEND landed in the first 16 bytes) */ i < LEN; ++i)
      if (buf[i] != PATTERN) {
        printf("byte %zu is 0x%02x, not 0x%02x\n", i, buf[i], PATTERN);
        return 1;
      }
    printf("verified\n");
    return 0;
  }
  const int range = !strcmp(argv[4], "range");
  struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = LEN, .lkey = mr->lkey};
  struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
                           .send_flags = IBV_SEND_SIGNALED,
                           .wr = {.rdma = {.remote_addr = peer.addr + (range ? 4096 : 0), .rkey = peer.rkey}}};
  struct ibv_send_wr *bad;
  if (ibv_post_send(qp, &wr, &bad)) {
    perror("ibv_post_send");
    return 3;
  }
  if (!strcmp(argv[4], "dereg") || !strcmp(argv[4], "unmap")) {
    if (!strcmp(argv[4], "unmap")) {
      munmap(buf, LEN);
      printf("unmapped (still registered) with the WRITE on the wire\n");
    } else {
      if (ibv_dereg_mr(mr)) {
        perror("ibv_dereg_mr");
        return 1;
      }
      memset(buf, OVERWRITE, LEN);
      munmap(buf, LEN);
      printf("deregistered, overwritten and unmapped with the WRITE on the wire\n");
    }
    if (wait_wc(cq, &wc, 30)) {
      printf("no completion for the WRITE\n");
      return 1;
    }
    printf("WRITE: %s\n", ibv_wc_status_str(wc.status));
    if (wc.status != IBV_WC_SUCCESS) return 1;
    if (tell_peer(&h)) {
      printf("the SEND to the server failed\n");
      return 1;
    }
    return 0;
  }
  if (range) {
    if (wait_wc(cq, &wc, 30)) {
      printf("no completion for the WRITE\n");
      return 1;
    }
    printf("WRITE: %s\n", ibv_wc_status_str(wc.status));
    return wc.status == IBV_WC_REM_ACCESS_ERR ? 0 : 1;
  }
  /* flush */
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE)) {
    perror("ibv_modify_qp ERR");
    return 1;
  }
  if (wait_wc(cq, &wc, 30)) {
    printf("no completion for the WRITE\n");
    return 1;
  }
  printf("WRITE: %s\n", ibv_wc_status_str(wc.status));
  if (wc.status != IBV_WC_WR_FLUSH_ERR && wc.status != IBV_WC_SUCCESS) return 1;
  munmap(buf, LEN); /* ours again: the MR stays registered, nothing may read it */
  sleep(1);
  printf("no access to the unmapped buffer after the flush\n");
  return 0;
}
