/* An MPI job whose every result is checked: point-to-point messages of
 * 1 byte to 4 MiB (eager, rendezvous and everything between) around a ring,
 * blocking and non-blocking, with contents that depend on sender, size and
 * round; probes and wildcards; then the collectives (barrier, broadcast,
 * reduce, allreduce, gather, scatter, allgather, alltoall(v)) and one-sided
 * puts and gets in a window. Any mismatch makes the rank print what and
 * where, and the job exits non-zero. Rank 0 prints "mpi_check OK <ranks>"
 * at the end.
 *
 * It runs over whatever the MPI library chose; the tests (tests/mpi/)
 * restrict that to softverbs (UCX rc_verbs/ud_verbs, libfabric verbs, ...)
 * and require softverbs' log line that the device was opened. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;
static int failures;

#define CHECK(cond, ...)                                 \
  do {                                                   \
    if (!(cond)) {                                       \
      fprintf(stderr, "rank %d: FAIL: ", rank);          \
      fprintf(stderr, __VA_ARGS__);                      \
      fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__); \
      if (++failures > 20) MPI_Abort(MPI_COMM_WORLD, 2); \
    }                                                    \
  } while (0)

static unsigned char pattern(int from, size_t len, int round, size_t i) {
  return (unsigned char)(from * 131 + len * 7 + round * 17 + i * 29 + (i >> 8));
}

static void fill(unsigned char* buf, int from, size_t len, int round) {
  for (size_t i = 0; i < len; ++i) buf[i] = pattern(from, len, round, i);
}

static size_t first_wrong(const unsigned char* buf, int from, size_t len, int round) {
  for (size_t i = 0; i < len; ++i)
    if (buf[i] != pattern(from, len, round, i)) return i;
  return len;
}

static void ring_exchange(size_t len, int round, int nonblocking) {
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  unsigned char* out = malloc(len ? len : 1);
  unsigned char* in = malloc(len ? len : 1);
  fill(out, rank, len, round);
  memset(in, 0xee, len);
  MPI_Status st;
  if (nonblocking) {
    MPI_Request req[2];
    MPI_Irecv(in, (int)len, MPI_BYTE, left, round, MPI_COMM_WORLD, &req[0]);
    MPI_Isend(out, (int)len, MPI_BYTE, right, round, MPI_COMM_WORLD, &req[1]);
    MPI_Status sts[2];
    MPI_Waitall(2, req, sts);
    st = sts[0];
  } else {
    MPI_Sendrecv(out, (int)len, MPI_BYTE, right, round, in, (int)len, MPI_BYTE, left, round, MPI_COMM_WORLD,
                 &st);
  }
  int count = -1;
  MPI_Get_count(&st, MPI_BYTE, &count);
  CHECK(count == (int)len, "size %zu round %d: received %d bytes", len, round, count);
  CHECK(st.MPI_SOURCE == left && st.MPI_TAG == round, "size %zu: source %d tag %d", len, st.MPI_SOURCE,
        st.MPI_TAG);
  size_t bad = first_wrong(in, left, len, round);
  CHECK(bad == len, "size %zu round %d (%s): byte %zu from rank %d is %#x, expected %#x", len, round,
        nonblocking ? "isend/irecv" : "sendrecv", bad, left, bad < len ? in[bad] : 0,
        bad < len ? pattern(left, len, round, bad) : 0);
  free(out);
  free(in);
}

/* Any-source receives of messages each rank sends to rank 0, in order per
 * sender (MPI's non-overtaking rule). */
static void wildcard_and_order(void) {
  enum { kMessages = 50 };
  if (rank == 0) {
    int next[64] = {0};
    for (int n = 0; n < (size - 1) * kMessages; ++n) {
      MPI_Status st;
      MPI_Probe(MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st);
      int value[2];
      MPI_Recv(value, 2, MPI_INT, st.MPI_SOURCE, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      CHECK(value[0] == st.MPI_SOURCE, "wildcard: message claims rank %d, came from %d", value[0], st.MPI_SOURCE);
      CHECK(value[1] == next[st.MPI_SOURCE], "rank %d's message %d arrived as number %d", st.MPI_SOURCE,
            value[1], next[st.MPI_SOURCE]);
      next[st.MPI_SOURCE] = value[1] + 1;
    }
  } else {
    for (int i = 0; i < kMessages; ++i) {
      int value[2] = {rank, i};
      MPI_Send(value, 2, MPI_INT, 0, 7, MPI_COMM_WORLD);
    }
  }
}

static void collectives(void) {
  MPI_Barrier(MPI_COMM_WORLD);
  const int n = 100000;
  long* v = malloc(n * sizeof *v);
  long* r = malloc(n * sizeof *r);
  for (int root = 0; root < size; ++root) {
    for (int i = 0; i < n; ++i) v[i] = rank == root ? (long)i * 3 + root : -1;
    MPI_Bcast(v, n, MPI_LONG, root, MPI_COMM_WORLD);
    int bad = -1;
    for (int i = 0; i < n && bad < 0; ++i)
      if (v[i] != (long)i * 3 + root) bad = i;
    CHECK(bad < 0, "bcast from %d: element %d", root, bad);
  }
  for (int i = 0; i < n; ++i) v[i] = (long)(rank + 1) * (i + 1);
  MPI_Allreduce(v, r, n, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  long ranks_sum = (long)size * (size + 1) / 2;
  for (int i = 0; i < n; ++i)
    if (r[i] != ranks_sum * (i + 1)) {
      CHECK(0, "allreduce sum element %d: %ld, expected %ld", i, r[i], ranks_sum * (i + 1));
      break;
    }
  MPI_Reduce(v, r, n, MPI_LONG, MPI_MAX, size - 1, MPI_COMM_WORLD);
  if (rank == size - 1)
    for (int i = 0; i < n; ++i)
      if (r[i] != (long)size * (i + 1)) {
        CHECK(0, "reduce max element %d: %ld", i, r[i]);
        break;
      }

  int* all = malloc(size * sizeof *all);
  int mine = rank * 1000 + 7;
  MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
  for (int i = 0; i < size; ++i) CHECK(all[i] == i * 1000 + 7, "allgather[%d] = %d", i, all[i]);
  MPI_Gather(&mine, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank == 0)
    for (int i = 0; i < size; ++i) CHECK(all[i] == i * 1000 + 7, "gather[%d] = %d", i, all[i]);
  int got = -1;
  for (int i = 0; i < size; ++i) all[i] = i * 11 + 1;
  MPI_Scatter(all, 1, MPI_INT, &got, 1, MPI_INT, 0, MPI_COMM_WORLD);
  CHECK(got == rank * 11 + 1, "scatter got %d", got);

  /* All-to-all of 64 KiB blocks: every pair of ranks talks at once. */
  const int block = 64 * 1024;
  unsigned char* send = malloc((size_t)block * size);
  unsigned char* recv = malloc((size_t)block * size);
  for (int to = 0; to < size; ++to) fill(send + (size_t)to * block, rank * 64 + to, block, 3);
  MPI_Alltoall(send, block, MPI_BYTE, recv, block, MPI_BYTE, MPI_COMM_WORLD);
  for (int from = 0; from < size; ++from) {
    size_t bad = first_wrong(recv + (size_t)from * block, from * 64 + rank, block, 3);
    CHECK(bad == (size_t)block, "alltoall block from %d: byte %zu", from, bad);
  }
  free(send);
  free(recv);
  free(all);
  free(v);
  free(r);
}

/* One-sided: each rank puts into its right neighbour's window, then gets
 * from its left neighbour's, between fences. */
static void one_sided(void) {
  const int n = 4096;
  int* base = NULL;
  MPI_Win win;
  MPI_Win_allocate(n * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  for (int i = 0; i < n; ++i) base[i] = -1;
  int* mine = malloc(n * sizeof *mine);
  for (int i = 0; i < n; ++i) mine[i] = rank * 100000 + i;
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  MPI_Win_fence(0, win);
  MPI_Put(mine, n, MPI_INT, right, 0, n, MPI_INT, win);
  MPI_Win_fence(0, win);
  for (int i = 0; i < n; ++i)
    if (base[i] != left * 100000 + i) {
      CHECK(0, "put from %d: element %d is %d", left, i, base[i]);
      break;
    }
  int* fetched = malloc(n * sizeof *fetched);
  MPI_Get(fetched, n, MPI_INT, left, 0, n, MPI_INT, win);
  MPI_Win_fence(0, win);
  int expect_from = (left + size - 1) % size;  /* left's window holds its own left's data */
  for (int i = 0; i < n; ++i)
    if (fetched[i] != expect_from * 100000 + i) {
      CHECK(0, "get from %d: element %d is %d", left, i, fetched[i]);
      break;
    }
  MPI_Win_free(&win);
  free(mine);
  free(fetched);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int skip_one_sided = argc > 1 && strcmp(argv[1], "--no-one-sided") == 0;
  int round = 0;
  for (size_t len = 1; len <= (4u << 20); len = len < 64 ? len * 2 : len * 4 + 3) {
    ring_exchange(len, round++, 0);
    ring_exchange(len, round++, 1);
  }
  ring_exchange(0, round++, 0);
  wildcard_and_order();
  collectives();
  if (!skip_one_sided) one_sided();
  int total = 0;
  MPI_Reduce(&failures, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    if (total == 0)
      printf("mpi_check OK %d ranks\n", size);
    else
      printf("mpi_check FAILED: %d failures\n", total);
  }
  MPI_Finalize();
  return (rank == 0 ? total : failures) == 0 ? 0 : 1;
}
