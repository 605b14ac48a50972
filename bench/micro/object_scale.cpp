// What one verb costs as the objects of a process grow (issue 39, item 3):
// a NIC registers an MR and destroys a QP at about the same cost whether
// the process holds ten of them or sixty thousand.
//
//   object_scale mr N   registers N MRs of 4 KiB (the pages of one
//                       mapping, one MR each), then deregisters them
//   object_scale qp N   creates N RC QPs sharing one CQ, connects them in
//                       pairs, then destroys them
//
// Prints one line per run: the total, and the mean cost of one call over
// windows of the run (first, 25%, 50%, 75%, last), so a cost that grows
// with the objects already there shows as a rising curve. Uses the public
// verbs API only: the same binary measures any libibverbs.so.1
// (LD_LIBRARY_PATH), ours before and after a change alike.
#include <infiniband/verbs.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "loopback.h"

namespace {

using Clock = std::chrono::steady_clock;

double us_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

// "first=302 p25=... last=1019": the mean of `window` calls at each point.
std::string curve(const std::vector<double>& us) {
  const size_t n = us.size(), window = std::max<size_t>(1, std::min<size_t>(256, n / 10));
  std::string out;
  const std::pair<const char*, double> points[] = {{"first", 0}, {"p25", .25}, {"p50", .5}, {"p75", .75}, {"last", 1}};
  for (auto [name, at] : points) {
    size_t from = std::min(n - window, static_cast<size_t>(at * static_cast<double>(n - window)));
    double sum = 0;
    for (size_t i = from; i < from + window; ++i) sum += us[i];
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s=%.1f", out.empty() ? "" : " ", name, sum / static_cast<double>(window));
    out += buf;
  }
  return out + " us/call (means of " + std::to_string(window) + ")";
}

double total_s(const std::vector<double>& us) {
  double s = 0;
  for (double u : us) s += u;
  return s / 1e6;
}

int bench_mr(ibv_pd* pd, size_t n) {
  constexpr size_t kPage = 4096;
  void* mem = mmap(nullptr, n * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) die("mmap");
  auto* bytes = static_cast<uint8_t*>(mem);
  std::vector<ibv_mr*> mrs(n);
  std::vector<double> reg(n), dereg(n);
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  for (size_t i = 0; i < n; ++i) {
    bytes[i * kPage] = 1;  // an application's buffer has been written
    auto t0 = Clock::now();
    mrs[i] = ibv_reg_mr(pd, bytes + i * kPage, kPage, access);
    reg[i] = us_between(t0, Clock::now());
    if (!mrs[i]) die("ibv_reg_mr");
  }
  for (size_t i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    if (ibv_dereg_mr(mrs[i])) die("ibv_dereg_mr");
    dereg[i] = us_between(t0, Clock::now());
  }
  std::printf("mr %zu: registration %.3f s, %s; deregistration %.3f s, %s\n", n, total_s(reg), curve(reg).c_str(),
              total_s(dereg), curve(dereg).c_str());
  munmap(mem, n * kPage);
  return 0;
}

int bench_qp(ibv_context* ctx, ibv_pd* pd, size_t n) {
  ibv_device_attr da{};
  if (ibv_query_device(ctx, &da)) die("ibv_query_device");
  // Room for one send and one receive completion per QP, as far as the device allows.
  const int cqe = static_cast<int>(std::min<size_t>(2 * n, static_cast<size_t>(da.max_cqe)));
  ibv_cq* cq = ibv_create_cq(ctx, cqe, nullptr, nullptr, 0);
  if (!cq) die("ibv_create_cq");
  const int gid_index = loopback_gid_index(ctx);
  std::vector<ibv_qp*> qps(n);
  auto t0 = Clock::now();
  for (size_t i = 0; i < n; ++i) {
    ibv_qp_init_attr ia{};
    ia.qp_type = IBV_QPT_RC;
    ia.send_cq = ia.recv_cq = cq;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    qps[i] = ibv_create_qp(pd, &ia);
    if (!qps[i]) die("ibv_create_qp");
  }
  for (size_t i = 0; i + 1 < n; i += 2) {
    if (connect_loopback(qps[i], qps[i + 1]->qp_num, gid_index, IBV_ACCESS_REMOTE_WRITE) ||
        connect_loopback(qps[i + 1], qps[i]->qp_num, gid_index, IBV_ACCESS_REMOTE_WRITE))
      die("ibv_modify_qp");
  }
  const double setup_s = us_between(t0, Clock::now()) / 1e6;
  std::vector<double> destroy(n);
  for (size_t i = 0; i < n; ++i) {
    auto t = Clock::now();
    if (ibv_destroy_qp(qps[i])) die("ibv_destroy_qp");
    destroy[i] = us_between(t, Clock::now());
  }
  std::printf("qp %zu (cqe %d): create+connect %.3f s; destroy %.3f s, %s\n", n, cqe, setup_s, total_s(destroy),
              curve(destroy).c_str());
  ibv_destroy_cq(cq);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "mr") && std::strcmp(argv[1], "qp"))) {
    std::fprintf(stderr, "usage: %s mr|qp COUNT\n", argv[0]);
    return 2;
  }
  const size_t n = std::strtoul(argv[2], nullptr, 0);
  if (n == 0) return 2;
  int num = 0;
  ibv_device** list = ibv_get_device_list(&num);
  if (!list || num == 0) die("no RDMA device");
  ibv_context* ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!ctx) die("ibv_open_device");
  ibv_pd* pd = ibv_alloc_pd(ctx);
  if (!pd) die("ibv_alloc_pd");
  int rc = std::strcmp(argv[1], "mr") == 0 ? bench_mr(pd, n) : bench_qp(ctx, pd, n);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  return rc;
}
