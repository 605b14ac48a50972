// What a process costs to start and to keep (issue 39, item 6): N
// processes at once each open the device and make what an MPI rank's first
// connection needs (PD, CQ, RC QP, a 4 KiB MR), then sleep until all are
// ready. Prints how long each took (median, p99, max), the wall time until
// all were ready, and what each holds (PSS, and its shared part, from
// /proc/<pid>/smaps_rollup).
//   process_startup N
#include <infiniband/verbs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

// Opens the device and makes one of each object; the ns it took, or 0.
uint64_t start_up() {
  const uint64_t t0 = now_ns();
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_context* ctx = list && n ? ibv_open_device(list[0]) : nullptr;
  if (!ctx) return 0;
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = pd ? ibv_create_cq(ctx, 16, nullptr, nullptr, 0) : nullptr;
  if (!cq) return 0;
  ibv_qp_init_attr attr{};
  attr.send_cq = attr.recv_cq = cq;
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 8;
  attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
  static char buf[4096];
  if (!ibv_create_qp(pd, &attr) || !ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE)) return 0;
  return now_ns() - t0;  // (all of it stays until the process exits)
}

// A field of /proc/<pid>/smaps_rollup, in kB (0 if absent).
long rollup_kb(pid_t pid, const std::string& field) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/smaps_rollup");
  std::string key;
  long value = 0;
  while (f >> key) {
    if (key == field + ":") {
      f >> value;
      return value;
    }
    f.ignore(1 << 16, '\n');
  }
  return 0;
}

template <class T>
T at_fraction(std::vector<T> v, double q) {
  if (v.empty()) return T{};
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 0;
  if (n <= 0) {
    std::fprintf(stderr, "usage: %s <processes>\n", argv[0]);
    return 2;
  }
  int results[2], release[2];
  if (pipe(results) || pipe(release)) return std::perror("pipe"), 1;
  std::vector<pid_t> kids;
  const uint64_t t0 = now_ns();
  for (int i = 0; i < n; ++i) {
    pid_t pid = fork();
    if (pid < 0) return std::perror("fork"), 1;
    if (pid == 0) {
      close(results[0]);
      close(release[1]);
      const uint64_t took = start_up();
      if (write(results[1], &took, sizeof took) != sizeof took) _exit(3);
      char c;
      while (read(release[0], &c, 1) > 0) {}  // everyone holds at once
      _exit(took ? 0 : 1);
    }
    kids.push_back(pid);
  }
  close(results[1]);
  close(release[0]);
  std::vector<uint64_t> took;
  uint64_t t;
  int failed = 0;
  while (static_cast<int>(took.size()) + failed < n && read(results[0], &t, sizeof t) == sizeof t)
    t ? took.push_back(t) : void(++failed);
  const double wall_ms = (now_ns() - t0) / 1e6;
  std::vector<long> pss, pss_shmem;
  for (pid_t pid : kids) {
    pss.push_back(rollup_kb(pid, "Pss"));
    pss_shmem.push_back(rollup_kb(pid, "Pss_Shmem"));
  }
  close(release[1]);
  for (pid_t pid : kids) waitpid(pid, nullptr, 0);
  std::printf("processes %d ready %zu failed %d wall_ms %.1f start_us_median %.0f p99 %.0f max %.0f "
              "pss_kB_median %ld pss_shmem_kB_median %ld\n",
              n, took.size(), failed, wall_ms, at_fraction(took, 0.5) / 1e3, at_fraction(took, 0.99) / 1e3,
              at_fraction(took, 1.0) / 1e3, at_fraction(pss, 0.5), at_fraction(pss_shmem, 0.5));
  return failed ? 1 : 0;
}
