/* An MPI ping-pong between ranks 0 and 1 that times every iteration, for
 * the tail a mean hides: a network thread's wake-up, a stale alarm or a
 * page fault costs one message in five tens of microseconds while the
 * median does not move (bench/mpi_hosts_tail.py).
 *   pingpong_tail [ITERATIONS [SIZE [WARMUP]]]   default: 100000 8 1000
 * Rank 0 prints one line, one-way times in microseconds (half the round
 * trip): "avg A p50 B p90 C p99 D over15 P% of_time T%", where P is the share
 * of iterations over 15 us and T their share of the time, then the median
 * of each successive 2000 iterations ("chunks ..."), which shows a slow
 * start (a first pass through cold receive buffers). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static void exchange(int rank, char* buf, int size) {
  if (rank == 0) {
    MPI_Send(buf, size, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
    MPI_Recv(buf, size, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (rank == 1) {
    MPI_Recv(buf, size, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(buf, size, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int n = argc > 1 ? atoi(argv[1]) : 100000;
  const int size = argc > 2 ? atoi(argv[2]) : 8;
  const int warmup = argc > 3 ? atoi(argv[3]) : 1000;
  enum { kChunk = 2000 };
  char* buf = calloc(1, (size_t)size + 1);
  double* t = malloc(sizeof(double) * (size_t)n);
  for (int i = 0; i < warmup; ++i) exchange(rank, buf, size);
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < n; ++i) {
    const double a = MPI_Wtime();
    exchange(rank, buf, size);
    t[i] = (MPI_Wtime() - a) * 1e6 / 2;
  }
  const double avg = (MPI_Wtime() - start) * 1e6 / 2 / n;
  if (rank == 0) {
    printf("chunks");
    for (int c = 0; c + kChunk <= n; c += kChunk) {
      qsort(t + c, kChunk, sizeof(double), by_value);  /* (the whole sort below does not mind) */
      printf(" %.1f", t[c + kChunk / 2]);
    }
    printf("\n");
    double sum = 0, over = 0, over_time = 0;
    for (int i = 0; i < n; ++i) {
      sum += t[i];
      if (t[i] > 15) {
        ++over;
        over_time += t[i];
      }
    }
    qsort(t, (size_t)n, sizeof(double), by_value);
    printf("avg %.1f p50 %.1f p90 %.1f p99 %.1f over15 %.1f%% of_time %.0f%%\n", avg, t[n / 2], t[n * 9 / 10],
           t[n * 99 / 100], 100 * over / n, 100 * over_time / sum);
  }
  free(t);
  free(buf);
  MPI_Finalize();
  return 0;
}
