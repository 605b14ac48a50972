// One process of a ring (issue 39, item 6): it listens on its own address,
// connects an RC QP to the next process's (rdma_cm, synchronous endpoints)
// while a thread accepts the previous one's, then passes a token on: it
// receives a number from the previous process and sends it, plus one, to
// the next. Process 0 starts with 1 and checks, at the end of each round,
// that the token came back as rounds x processes. Everything sleeps on
// completion channels (rdma_get_recv_comp), so hundreds of processes share
// two cores.
//   cm_ring_tool INDEX COUNT MY_ADDR MY_PORT NEXT_ADDR NEXT_PORT ROUNDS
//   cm_ring_tool --fork COUNT ADDR FIRST_PORT ROUNDS
// The second forms the whole ring on one address, process i on port
// FIRST_PORT + i, forked rather than started by a shell: 4096 shells and
// `timeout`s cost more than the ring (a third of the test's CPU time).
// With HOLD_UNTIL_FILE set, every member holds the device once its part is
// done, the parent prints "holding: N members done", and all go when the
// file exists: the ring is then the processes that fill a host's registry
// (e2e_process_limit_per_namespace).
#include <errno.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static struct ibv_qp_init_attr qp_attr(void) {
  struct ibv_qp_init_attr a;
  memset(&a, 0, sizeof a);
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = a.cap.max_recv_wr = 4;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.sq_sig_all = 1;
  return a;
}

static struct rdma_addrinfo* address(const char* host, const char* port, int passive) {
  struct rdma_addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_port_space = RDMA_PS_TCP;
  if (passive) hints.ai_flags = RAI_PASSIVE;
  if (rdma_getaddrinfo(host, port, &hints, &res)) {
    fprintf(stderr, "rdma_getaddrinfo %s:%s: %s\n", host, port, strerror(errno));
    return NULL;
  }
  return res;
}

struct side {
  struct rdma_cm_id* id;
  struct ibv_mr* mr;
  uint64_t buf;
};

static struct rdma_cm_id* listener;
static struct side in;  // from the previous process
static int accept_rc = -1;

static void* accept_previous(void* unused) {
  (void)unused;
  if (rdma_get_request(listener, &in.id)) return perror("rdma_get_request"), NULL;
  in.mr = rdma_reg_msgs(in.id, &in.buf, sizeof in.buf);
  if (!in.mr || rdma_post_recv(in.id, NULL, &in.buf, sizeof in.buf, in.mr)) return perror("post_recv"), NULL;
  if (rdma_accept(in.id, NULL)) return perror("rdma_accept"), NULL;
  accept_rc = 0;
  return NULL;
}

static int member(char** argv);

// --fork COUNT ADDR FIRST_PORT ROUNDS: every member a child of this process.
static int fork_ring(char** argv) {
  const int count = atoi(argv[2]), first_port = atoi(argv[4]);
  pid_t* kids = calloc((size_t)count, sizeof(pid_t));
  if (!kids || count < 2) return 2;
  const char* hold = getenv("HOLD_UNTIL_FILE");
  int done[2] = {-1, -1}, release[2] = {-1, -1};
  if (hold && (pipe(done) || pipe(release))) return perror("pipe"), 1;
  for (int i = 0; i < count; ++i) {
    kids[i] = fork();
    if (kids[i] < 0) return perror("fork"), 1;
    if (kids[i] == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // (the test's timeout kills this process: the ring goes with it)
      if (getppid() == 1) _exit(1);
      char index[16], my_port[16], next_port[16];
      snprintf(index, sizeof index, "%d", i);
      snprintf(my_port, sizeof my_port, "%d", first_port + i);
      snprintf(next_port, sizeof next_port, "%d", first_port + (i + 1) % count);
      char* args[] = {argv[0], index, argv[2], argv[3], my_port, argv[3], next_port, argv[5], NULL};
      const int rc = member(args);
      if (hold) {  // the device still open: until the parent closes the release pipe
        close(done[0]);
        close(release[1]);
        const char status = (char)rc;
        if (write(done[1], &status, 1) != 1) _exit(3);
        char c;
        while (read(release[0], &c, 1) > 0) {}
      }
      _exit(rc);
    }
  }
  if (hold) {
    close(done[1]);
    close(release[0]);
    int finished = 0;
    char status;
    while (finished < count && read(done[0], &status, 1) == 1) ++finished;
    printf("holding: %d members done\n", finished);
    fflush(stdout);
    while (access(hold, F_OK) != 0) usleep(20000);
    close(release[1]);
  }
  int failed = 0;
  for (int i = 0; i < count; ++i) {
    int st = 0;
    if (waitpid(kids[i], &st, 0) != kids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "process %d failed (status %#x)\n", i, st);
      ++failed;
    }
  }
  free(kids);
  return failed ? 1 : 0;
}

int main(int argc, char** argv) {
  if (argc == 6 && strcmp(argv[1], "--fork") == 0) return fork_ring(argv);
  if (argc != 8) {
    fprintf(stderr, "usage: %s INDEX COUNT MY_ADDR MY_PORT NEXT_ADDR NEXT_PORT ROUNDS\n"
                    "       %s --fork COUNT ADDR FIRST_PORT ROUNDS\n", argv[0], argv[0]);
    return 2;
  }
  return member(argv);
}

static int member(char** argv) {
  const int index = atoi(argv[1]), count = atoi(argv[2]), rounds = atoi(argv[7]);
  struct ibv_qp_init_attr attr = qp_attr();
  struct rdma_addrinfo* mine = address(argv[3], argv[4], 1);
  if (!mine || rdma_create_ep(&listener, mine, NULL, &attr) || rdma_listen(listener, 4)) {
    const int err = errno;
    char cmd[160];
    snprintf(cmd, sizeof cmd, "ss -xlpn | grep -F ':%s' >&2", argv[4]);
    fprintf(stderr, "listen on %s:%s: %s; who holds the name:\n", argv[3], argv[4], strerror(err));
    if (getenv("RING_DEBUG")) system(cmd);
    return 1;
  }
  pthread_t acceptor;
  if ((errno = pthread_create(&acceptor, NULL, accept_previous, NULL)))
    return perror("pthread_create (the host's task or pid limit?)"), 1;

  // The next process may not listen yet: try again (its REQ is rejected).
  struct side out = {0};
  struct rdma_addrinfo* next = address(argv[5], argv[6], 0);
  if (!next) return 1;
  for (int tries = 0;; ++tries) {
    attr = qp_attr();
    if (rdma_create_ep(&out.id, next, NULL, &attr)) return perror("rdma_create_ep"), 1;
    if (rdma_connect(out.id, NULL) == 0) break;
    if (tries == 3000) return fprintf(stderr, "%d: cannot connect to the next: %s\n", index, strerror(errno)), 1;
    rdma_destroy_ep(out.id);
    usleep(20000);
  }
  out.mr = rdma_reg_msgs(out.id, &out.buf, sizeof out.buf);
  if (!out.mr) return perror("rdma_reg_msgs"), 1;
  pthread_join(acceptor, NULL);
  if (accept_rc) return 1;

  struct ibv_wc wc;
  for (int r = 1; r <= rounds; ++r) {
    if (index == 0 && r == 1) {
      out.buf = 1;
    } else {
      if (rdma_get_recv_comp(in.id, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
        return fprintf(stderr, "%d: receive failed\n", index), 1;
      const uint64_t got = in.buf;
      if (rdma_post_recv(in.id, NULL, &in.buf, sizeof in.buf, in.mr)) return perror("post_recv"), 1;
      if (index == 0 && got != (uint64_t)(r - 1) * count) {
        fprintf(stderr, "ring: round %d came back as %llu, not %llu\n", r - 1, (unsigned long long)got,
                (unsigned long long)(r - 1) * count);
        return 1;
      }
      out.buf = got + 1;
    }
    if (rdma_post_send(out.id, NULL, &out.buf, sizeof out.buf, out.mr, 0) ||
        rdma_get_send_comp(out.id, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
      return fprintf(stderr, "%d: send failed\n", index), 1;
  }
  if (index == 0) {  // the last round's token
    if (rdma_get_recv_comp(in.id, &wc) != 1 || wc.status != IBV_WC_SUCCESS) return 1;
    if (in.buf != (uint64_t)rounds * count)
      return fprintf(stderr, "ring: the last round came back as %llu\n", (unsigned long long)in.buf), 1;
    printf("ring OK: %d processes, %d rounds\n", count, rounds);
    fflush(stdout);
  }
  // Every token this process sent was acknowledged (its send completed):
  // leaving now loses nothing.
  return 0;
}
