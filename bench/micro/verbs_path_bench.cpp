// The cost of softverbs' own software path, without cross-process cache
// traffic: two QPs of one process, one operation at a time, through the
// public verbs API. What a message costs in instructions and local memory;
// the cross-process figures come from bench/run.sh.
#include <benchmark/benchmark.h>

#include "loopback.h"

namespace {

// SEND + receive completion + repost, unsignaled on the sender.
void BM_Send(benchmark::State& state) {
  Loopback l;
  uint32_t len = static_cast<uint32_t>(state.range(0));
  int n = 0;
  for (auto _ : state) {
    l.post_recv(len);
    l.post(IBV_WR_SEND, len, ++n % 64 == 0);
    Loopback::wait(l.cq_b);
    if (n % 64 == 0) Loopback::wait(l.cq_a);
  }
  state.SetBytesProcessed(state.iterations() * len);
}
BENCHMARK(BM_Send)->Arg(8)->Arg(4096);

// RDMA WRITE, signaled every 64th.
void BM_Write(benchmark::State& state) {
  Loopback l;
  uint32_t len = static_cast<uint32_t>(state.range(0));
  int n = 0;
  for (auto _ : state) {
    bool signaled = ++n % 64 == 0;
    l.post(IBV_WR_RDMA_WRITE, len, signaled);
    if (signaled) Loopback::wait(l.cq_a);
  }
  state.SetBytesProcessed(state.iterations() * len);
}
BENCHMARK(BM_Write)->Arg(8)->Arg(65536);

// RDMA READ, waiting for each completion (ib_read_lat's loop).
void BM_ReadRoundTrip(benchmark::State& state) {
  Loopback l;
  for (auto _ : state) {
    l.post(IBV_WR_RDMA_READ, 8, true);
    Loopback::wait(l.cq_a);
  }
}
BENCHMARK(BM_ReadRoundTrip);

// An empty poll: what a busy-waiting application pays per spin.
void BM_EmptyPoll(benchmark::State& state) {
  Loopback l;
  ibv_wc wc;
  for (auto _ : state) benchmark::DoNotOptimize(ibv_poll_cq(l.cq_a, 1, &wc));
}
BENCHMARK(BM_EmptyPoll);

}  // namespace

BENCHMARK_MAIN();
