/* The program of roce_read_depth_netns.sh, written against
 * <infiniband/verbs.h> only: RDMA READs and atomics between two hosts with
 * an initiator depth (max_rd_atomic) of DEPTH, as a NIC runs them: up to
 * DEPTH on the wire at once, never more, and a fenced WRITE only after
 * every READ and atomic before it was answered. The order on the wire is
 * read from the client's packet capture (SOFTVERBS_PCAP) by the script;
 * this program checks the bytes.
 *   read_depth_tool server DIR GID_INDEX
 *       a 1 MiB buffer, byte i = (i * 7 + 3) & 0xff, and a 64-bit counter
 *       of 1000 after it; writes DIR/server, waits for DIR/client,
 *       connects; on the client's SEND checks the fenced WRITE's 8 bytes
 *       ("fenced write landed") and the counter (1000 + READS) and exits
 *       0, else 1
 *   read_depth_tool client DIR GID_INDEX DEPTH
 *       posts READS READs of 32 KiB (one ibv_post_send list), then READS
 *       fetch-and-adds of 1 to the counter, then a WRITE of 8 bytes with
 *       IBV_SEND_FENCE; checks every READ's bytes and that the atomics saw
 *       1000, 1001, ... in order; then a SEND tells the server
 *   Exits 0 on success; prints what went wrong otherwise. */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rc_sides.h"

#define LEN (1u << 20)
#define READS 8
#define READ_LEN (32u << 10)
#define COUNTER_AT LEN
#define FENCED_AT (LEN + 64)
#define FENCED 0x0123456789abcdefull

static uint8_t pattern(size_t i) { return (uint8_t)((i * 7 + 3) & 0xff); }

int main(int argc, char **argv) {
  int server, gid_index;
  const char *dir;
  if (side_args(argc, argv, "server DIR GID_INDEX | client DIR GID_INDEX DEPTH", &server, &dir, &gid_index)) return 2;
  const int depth = server ? 16 : atoi(argv[4]);
  const unsigned remote = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
  struct rc_host h;
  if (open_rc_host(&h, 32, LEN + 4096, remote)) return 3;
  struct ibv_cq *cq = h.cq;
  struct ibv_qp *qp = h.qp;
  struct ibv_mr *mr = h.mr;
  uint8_t *buf = h.buf;
  if (server) {
    for (size_t i = 0; i < LEN; ++i) buf[i] = pattern(i);
    *(uint64_t *)(buf + COUNTER_AT) = 1000;
  }
  struct side peer;
  if (meet_peer(&h, dir, server, gid_index, 0x2345, &peer, remote, (uint8_t)depth)) return 3;
  struct ibv_wc wc;
  if (server) {
    const int waited = await_peer(&h, buf + LEN + 128);
    if (waited) return waited;
    const uint64_t fenced = *(uint64_t *)(buf + FENCED_AT), counter = *(uint64_t *)(buf + COUNTER_AT);
    if (fenced != FENCED || counter != 1000 + READS) {
      printf("fenced WRITE %#llx, counter %llu (expected %#llx, %u)\n", (unsigned long long)fenced,
             (unsigned long long)counter, FENCED, 1000 + READS);
      return 1;
    }
    printf("fenced write landed, counter %llu\n", (unsigned long long)counter);
    return 0;
  }
  /* READS READs, READS atomics, one fenced WRITE: one list, so the
   * requester meets them all at once. */
  struct ibv_sge sges[2 * READS + 1];
  struct ibv_send_wr wrs[2 * READS + 1], *bad;
  memset(wrs, 0, sizeof wrs);
  for (int k = 0; k < READS; ++k) {
    sges[k] = (struct ibv_sge){.addr = (uintptr_t)(buf + k * READ_LEN), .length = READ_LEN, .lkey = mr->lkey};
    wrs[k] = (struct ibv_send_wr){.wr_id = (uint64_t)k, .sg_list = &sges[k], .num_sge = 1,
                                  .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED,
                                  .wr = {.rdma = {.remote_addr = peer.addr + (uint64_t)(k * 2 + 1) * READ_LEN,
                                                  .rkey = peer.rkey}}};
  }
  for (int k = 0; k < READS; ++k) {
    const int i = READS + k;
    sges[i] = (struct ibv_sge){.addr = (uintptr_t)(buf + LEN + 256 + 8 * k), .length = 8, .lkey = mr->lkey};
    wrs[i] = (struct ibv_send_wr){.wr_id = (uint64_t)i, .sg_list = &sges[i], .num_sge = 1,
                                  .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD, .send_flags = IBV_SEND_SIGNALED,
                                  .wr = {.atomic = {.remote_addr = peer.addr + COUNTER_AT, .compare_add = 1,
                                                    .rkey = peer.rkey}}};
  }
  static uint64_t fenced = FENCED;
  sges[2 * READS] = (struct ibv_sge){.addr = (uintptr_t)&fenced, .length = 8};
  wrs[2 * READS] = (struct ibv_send_wr){.wr_id = 2 * READS, .sg_list = &sges[2 * READS], .num_sge = 1,
                                        .opcode = IBV_WR_RDMA_WRITE,
                                        .send_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE | IBV_SEND_INLINE,
                                        .wr = {.rdma = {.remote_addr = peer.addr + FENCED_AT, .rkey = peer.rkey}}};
  for (int k = 0; k < 2 * READS; ++k) wrs[k].next = &wrs[k + 1];
  if (ibv_post_send(qp, wrs, &bad)) {
    perror("ibv_post_send");
    return 3;
  }
  for (int k = 0; k <= 2 * READS; ++k) {
    if (wait_wc(cq, &wc, 30)) {
      printf("no completion for work request %d\n", k);
      return 1;
    }
    if (wc.status != IBV_WC_SUCCESS || wc.wr_id != (uint64_t)k) {
      printf("work request %llu: %s (expected %d)\n", (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), k);
      return 1;
    }
  }
  for (int k = 0; k < READS; ++k)
    for (size_t i = 0; i < READ_LEN; ++i)
      if (buf[k * READ_LEN + i] != pattern((size_t)(k * 2 + 1) * READ_LEN + i)) {
        printf("READ %d: byte %zu is 0x%02x\n", k, i, buf[k * READ_LEN + i]);
        return 1;
      }
  for (int k = 0; k < READS; ++k)
    if (*(uint64_t *)(buf + LEN + 256 + 8 * k) != 1000u + (unsigned)k) {
      printf("atomic %d saw %llu, not %d\n", k, (unsigned long long)*(uint64_t *)(buf + LEN + 256 + 8 * k), 1000 + k);
      return 1;
    }
  printf("%d READs and %d atomics at depth %d: bytes and values right\n", READS, READS, depth);
  if (tell_peer(&h)) {
    printf("the SEND to the server failed\n");
    return 1;
  }
  return 0;
}
