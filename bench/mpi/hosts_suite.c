/* One MPI job that takes the figures of an MPI application between hosts
 * (bench/mpi_hosts.py runs it over softverbs and over TCP, same run):
 *   lat <size> <us>        ping-pong between rank 0 and rank P/2 (the
 *                          other host when each host has P/2 ranks), half
 *                          the round trip; the other ranks wait
 *   bw <size> <MB/s>       the same pair, 64 non-blocking sends in flight,
 *                          one byte back per window (OSU-style)
 *   allreduce|alltoall|bcast <size> <us>
 *                          one collective over all ranks, mean time per
 *                          call (size: bytes per rank: the reduced vector,
 *                          each block of alltoall, the broadcast buffer)
 *   matmul <n> <s>             a compute-and-communicate kernel: C = A x B on
 *                          N x N doubles, rows spread over the ranks, B's
 *                          blocks passed round a ring (1-D Cannon) with
 *                          MPI_Sendrecv_replace while each rank multiplies
 *   transpose <n> <s>      a communication-bound kernel (an FFT's
 *                          transposes): an N x N matrix of doubles, rows
 *                          spread over the ranks, transposed 8 times with
 *                          MPI_Alltoall and a local reordering
 *   cpu <s>                user + system CPU seconds of all ranks (every
 *                          thread: the MPI library's and softverbs'), from
 *                          MPI_Init's return to the end
 *   wall <s>               the measured part, first barrier to last
 * Every time is the slowest rank's (a collective is done when all are).
 *   hosts_suite [--quick]  */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

enum { kWindow = 64 };

static int rank, ranks, peer;
static int quick;

static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* Iterations for a message of `size` bytes: `base` up to 8 KiB, then as
 * many as move the same bytes, at least `least`. */
static int iterations(size_t size, int base, int least) {
  int n = size <= 8192 ? base : (int)((double)base * 8192 / size);
  if (quick) n /= 4;
  return n < least ? least : n;
}

/* How many timed iterations: `most` (what iterations() gives), fewer if
 * the warm-up's pace says they would take more than kBudgetMs, at least
 * `least`; rank 0's count, which every rank takes. (Four ranks on two
 * cores wait for the scheduler, milliseconds a message, over TCP too.) */
enum { kBudgetMs = 400 };  /* per figure */
static int agreed(int most, int least, double warmup_seconds, int warmup) {
  int n = most;
  const double each = warmup_seconds / warmup;
  if (each > 0 && each * n > kBudgetMs / 1000.0) n = (int)(kBudgetMs / 1000.0 / each);
  if (n < least) n = least;
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return n;
}

/* The slowest rank's figure. */
static double slowest(double mine) {
  double all;
  MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return all;
}

static void latency(char* buf, size_t size) {
  const int warmup = 20;
  int n = 0;
  double start = MPI_Wtime();
  for (int i = 0;; ++i) {
    if (i == warmup) {
      n = agreed(iterations(size, 4000, 20), 10, MPI_Wtime() - start, warmup);
      MPI_Barrier(MPI_COMM_WORLD);
      start = MPI_Wtime();
    }
    if (i >= warmup + n) break;
    if (rank == 0) {
      MPI_Send(buf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
      MPI_Recv(buf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == peer) {
      MPI_Recv(buf, (int)size, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buf, (int)size, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
    }
  }
  if (rank == 0) printf("lat %zu %.3f\n", size, (MPI_Wtime() - start) * 1e6 / (2.0 * n));
  MPI_Barrier(MPI_COMM_WORLD);
}

static void bandwidth(char* buf, size_t size) {
  const int warmup = 2;
  int n = 0;
  MPI_Request req[kWindow];
  char ack = 0;
  double start = MPI_Wtime();
  for (int i = 0;; ++i) {
    if (i == warmup) {
      n = agreed(iterations(size, 64 * 100, 64 * 2) / kWindow + 2, 2, MPI_Wtime() - start, warmup);
      MPI_Barrier(MPI_COMM_WORLD);
      start = MPI_Wtime();
    }
    if (i >= warmup + n) break;
    if (rank == 0) {
      for (int w = 0; w < kWindow; ++w) MPI_Isend(buf, (int)size, MPI_CHAR, peer, 2, MPI_COMM_WORLD, &req[w]);
      MPI_Waitall(kWindow, req, MPI_STATUSES_IGNORE);
      MPI_Recv(&ack, 1, MPI_CHAR, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == peer) {
      for (int w = 0; w < kWindow; ++w) MPI_Irecv(buf, (int)size, MPI_CHAR, 0, 2, MPI_COMM_WORLD, &req[w]);
      MPI_Waitall(kWindow, req, MPI_STATUSES_IGNORE);
      MPI_Send(&ack, 1, MPI_CHAR, 0, 3, MPI_COMM_WORLD);
    }
  }
  const double seconds = MPI_Wtime() - start;
  if (rank == 0) printf("bw %zu %.2f\n", size, (double)size * kWindow * n / seconds / 1e6);
  MPI_Barrier(MPI_COMM_WORLD);
}

enum Collective { kAllreduce, kAlltoall, kBcast };
static const char* const kCollectiveNames[] = {"allreduce", "alltoall", "bcast"};

static void collective(enum Collective which, char* send, char* recv, size_t size) {
  const int warmup = 5;
  int n = 0;
  double start = MPI_Wtime();
  for (int i = 0;; ++i) {
    if (i == warmup) {
      n = agreed(iterations(size * (which == kAlltoall ? (size_t)ranks : 1), 400, 10), 5, MPI_Wtime() - start,
                 warmup);
      MPI_Barrier(MPI_COMM_WORLD);
      start = MPI_Wtime();
    }
    if (i >= warmup + n) break;
    switch (which) {
      case kAllreduce:  /* (doubles: a reduction does arithmetic on each element) */
        MPI_Allreduce(send, recv, (int)(size / sizeof(double)), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        break;
      case kAlltoall:
        MPI_Alltoall(send, (int)size, MPI_CHAR, recv, (int)size, MPI_CHAR, MPI_COMM_WORLD);
        break;
      case kBcast:
        MPI_Bcast(send, (int)size, MPI_CHAR, 0, MPI_COMM_WORLD);
        break;
    }
  }
  const double us = slowest((MPI_Wtime() - start) * 1e6 / n);
  if (rank == 0) printf("%s %zu %.3f\n", kCollectiveNames[which], size, us);
}

/* C = A x B, N x N, each rank holding N/P consecutive rows of A, B and C.
 * Step s: this rank holds the B rows of rank (rank + s) % P, multiplies the
 * matching columns of its A rows into C, and passes them to rank - 1. */
static void matmul(int n) {
  const int rows = n / ranks;
  double* a = malloc(sizeof(double) * rows * n);
  double* b = malloc(sizeof(double) * rows * n);
  double* c = calloc((size_t)rows * n, sizeof(double));
  for (int i = 0; i < rows * n; ++i) {
    a[i] = (double)((i * 7 + rank) % 13) / 13.0;
    b[i] = (double)((i * 5 + rank) % 11) / 11.0;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int s = 0; s < ranks; ++s) {
    const int owner = (rank + s) % ranks;  /* whose rows of B we hold */
    for (int i = 0; i < rows; ++i)
      for (int k = 0; k < rows; ++k) {
        const double aik = a[i * n + owner * rows + k];
        const double* brow = b + (size_t)k * n;
        double* crow = c + (size_t)i * n;
        for (int j = 0; j < n; ++j) crow[j] += aik * brow[j];
      }
    MPI_Sendrecv_replace(b, rows * n, MPI_DOUBLE, (rank + ranks - 1) % ranks, 4, (rank + 1) % ranks, 4,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  const double seconds = slowest(MPI_Wtime() - start);
  double mine = 0, sum = 0;  /* (used, so the work is not optimised away) */
  for (int i = 0; i < rows * n; ++i) mine += c[i];
  MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("matmul %d %.4f\n", n, seconds);
  if (rank == 0 && sum != sum) printf("matmul: not a number\n");
  free(a);
  free(b);
  free(c);
}

/* Each rank holds N/P rows; after the exchange it holds N/P rows of the
 * transpose: block (r, q) goes from rank r to rank q, transposed. */
static void transpose(int n) {
  const int rows = n / ranks, block = rows * rows;
  double* m = malloc(sizeof(double) * rows * n);
  double* packed = malloc(sizeof(double) * rows * n);
  double* got = malloc(sizeof(double) * rows * n);
  for (int i = 0; i < rows * n; ++i) m[i] = rank * rows * n + i;
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int round = 0; round < 8; ++round) {
    for (int q = 0; q < ranks; ++q)  /* block q: columns q*rows.., packed transposed */
      for (int i = 0; i < rows; ++i)
        for (int j = 0; j < rows; ++j) packed[q * block + j * rows + i] = m[i * n + q * rows + j];
    MPI_Alltoall(packed, block, MPI_DOUBLE, got, block, MPI_DOUBLE, MPI_COMM_WORLD);
    for (int q = 0; q < ranks; ++q)
      for (int i = 0; i < rows; ++i) memcpy(m + i * n + q * rows, got + q * block + i * rows, sizeof(double) * rows);
  }
  const double seconds = slowest(MPI_Wtime() - start);
  /* 8 transposes (an even number): every rank holds its rows again. */
  int wrong = 0;
  for (int i = 0; i < rows * n; ++i) wrong |= m[i] != rank * rows * n + i;
  int any = 0;
  MPI_Reduce(&wrong, &any, 1, MPI_INT, MPI_LOR, 0, MPI_COMM_WORLD);
  if (rank == 0) printf(any ? "transpose: wrong result\n" : "transpose %d %.4f\n", n, seconds);
  free(m);
  free(packed);
  free(got);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const double cpu_start = cpu_seconds();
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  peer = ranks / 2;
  const size_t p2p_sizes[] = {8, 512, 4096, 32768, 262144, 1048576, 4194304};
  const size_t coll_sizes[] = {8, 4096, 65536, 1048576};
  const size_t largest = 4194304;
  char* send = malloc(largest * (size_t)ranks);
  char* recv = malloc(largest * (size_t)ranks);
  memset(send, 1, largest * (size_t)ranks);
  memset(recv, 0, largest * (size_t)ranks);
  MPI_Barrier(MPI_COMM_WORLD);
  const double wall_start = MPI_Wtime();
  for (size_t i = 0; i < sizeof p2p_sizes / sizeof *p2p_sizes; ++i) latency(send, p2p_sizes[i]);
  for (size_t i = 0; i < sizeof p2p_sizes / sizeof *p2p_sizes; ++i) bandwidth(send, p2p_sizes[i]);
  for (int which = kAllreduce; which <= kBcast; ++which)
    for (size_t i = 0; i < sizeof coll_sizes / sizeof *coll_sizes; ++i)
      collective((enum Collective)which, send, recv, coll_sizes[i]);
  matmul(quick ? 512 : 1024);
  transpose(quick ? 1024 : 2048);
  const double wall = MPI_Wtime() - wall_start;
  const double cpu = cpu_seconds() - cpu_start;
  double cpu_all = 0;
  MPI_Reduce(&cpu, &cpu_all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  const double wall_all = slowest(wall);
  if (rank == 0) printf("wall 0 %.3f\ncpu 0 %.3f\n", wall_all, cpu_all);
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
