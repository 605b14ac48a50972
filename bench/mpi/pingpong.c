/* MPI point-to-point figures between ranks 0 and 1, the way the OSU
 * micro-benchmarks take them:
 *   latency:   ping-pong, half the round trip, in microseconds
 *   bandwidth: rank 0 keeps a window of 64 non-blocking sends in flight,
 *              rank 1 answers each window with one byte; MB/s (10^6)
 * for each size given (bytes), after a warm-up. Prints one line per
 * figure: "lat <size> <us>" and "bw <size> <MB/s>".
 *   pingpong [SIZE...]      default: 8 64 512 4096 32768 262144 1048576 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kWindow = 64 };

static int iterations(size_t size, int base) {
  int n = size <= 8192 ? base : (int)(base * 8192 / size);
  return n < 20 ? 20 : n;
}

static double latency(int rank, char* buf, size_t size) {
  const int warmup = 100, n = iterations(size, 10000);
  double start = 0;
  for (int i = 0; i < warmup + n; ++i) {
    if (i == warmup) {
      MPI_Barrier(MPI_COMM_WORLD);
      start = MPI_Wtime();
    }
    if (rank == 0) {
      MPI_Send(buf, (int)size, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
      MPI_Recv(buf, (int)size, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buf, (int)size, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buf, (int)size, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
    }
  }
  return (MPI_Wtime() - start) * 1e6 / (2.0 * n);
}

static double bandwidth(int rank, char* buf, size_t size) {
  const int warmup = 5, n = iterations(size, 1000) / kWindow + 10;
  MPI_Request req[kWindow];
  char ack = 0;
  double start = 0;
  for (int i = 0; i < warmup + n; ++i) {
    if (i == warmup) {
      MPI_Barrier(MPI_COMM_WORLD);
      start = MPI_Wtime();
    }
    if (rank == 0) {
      for (int w = 0; w < kWindow; ++w) MPI_Isend(buf, (int)size, MPI_CHAR, 1, 2, MPI_COMM_WORLD, &req[w]);
      MPI_Waitall(kWindow, req, MPI_STATUSES_IGNORE);
      MPI_Recv(&ack, 1, MPI_CHAR, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      for (int w = 0; w < kWindow; ++w) MPI_Irecv(buf, (int)size, MPI_CHAR, 0, 2, MPI_COMM_WORLD, &req[w]);
      MPI_Waitall(kWindow, req, MPI_STATUSES_IGNORE);
      MPI_Send(&ack, 1, MPI_CHAR, 0, 3, MPI_COMM_WORLD);
    }
  }
  double seconds = MPI_Wtime() - start;
  return (double)size * kWindow * n / seconds / 1e6;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, ranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks != 2) {
    if (rank == 0) fprintf(stderr, "pingpong: run with 2 ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  static const size_t kDefault[] = {8, 64, 512, 4096, 32768, 262144, 1048576};
  size_t sizes[64];
  int count = 0;
  for (int i = 1; i < argc && count < 64; ++i) sizes[count++] = strtoul(argv[i], NULL, 0);
  if (count == 0)
    for (; count < (int)(sizeof kDefault / sizeof kDefault[0]); ++count) sizes[count] = kDefault[count];
  size_t largest = 1;
  for (int i = 0; i < count; ++i)
    if (sizes[i] > largest) largest = sizes[i];
  char* buf = malloc(largest);
  memset(buf, rank + 1, largest);
  /* Connections come up lazily and UCX starts on its wire-up transport
   * (UD) before the RC lanes are ready: the first figure measured after
   * 100 warm-up round trips was 3.5x the next ones. Warm up for real. */
  for (int i = 0; i < 3; ++i) (void)latency(rank, buf, 8);
  for (int i = 0; i < count; ++i) {
    double us = latency(rank, buf, sizes[i]);
    if (rank == 0) printf("lat %zu %.3f\n", sizes[i], us);
  }
  for (int i = 0; i < count; ++i) {
    double mbs = bandwidth(rank, buf, sizes[i]);
    if (rank == 0) printf("bw %zu %.2f\n", sizes[i], mbs);
  }
  fflush(stdout);
  free(buf);
  MPI_Finalize();
  return 0;
}
