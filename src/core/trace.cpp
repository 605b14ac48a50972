#include "core/trace.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/post_hooks.h"
#include "core/qp.h"
#include "util/clock.h"
#include "util/knobs.h"
#include "util/log.h"

namespace sv::trace {

bool g_on = false;

namespace {

std::mutex g_mu;
FILE* g_out = nullptr;  // (never closed: threads may still write while the process exits)
std::unordered_set<uint32_t>* g_named = nullptr;  // QPs whose track has its name

double now_us() { return static_cast<double>(monotonic_ns()) / 1000.0; }

const char* opcode_name(ibv_wr_opcode op) {
  switch (op) {
    case IBV_WR_RDMA_WRITE: return "RDMA_WRITE";
    case IBV_WR_RDMA_WRITE_WITH_IMM: return "RDMA_WRITE_WITH_IMM";
    case IBV_WR_SEND: return "SEND";
    case IBV_WR_SEND_WITH_IMM: return "SEND_WITH_IMM";
    case IBV_WR_RDMA_READ: return "RDMA_READ";
    case IBV_WR_ATOMIC_CMP_AND_SWP: return "ATOMIC_CMP_AND_SWP";
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return "ATOMIC_FETCH_AND_ADD";
    case IBV_WR_LOCAL_INV: return "LOCAL_INV";
    case IBV_WR_BIND_MW: return "BIND_MW";
    case IBV_WR_SEND_WITH_INV: return "SEND_WITH_INV";
    case IBV_WR_TSO: return "TSO";
    default: return "WR";
  }
}

const char* type_name(ibv_qp_type t) {
  switch (t) {
    case IBV_QPT_RC: return "RC";
    case IBV_QPT_UC: return "UC";
    case IBV_QPT_UD: return "UD";
    case IBV_QPT_RAW_PACKET: return "RAW_PACKET";
    case IBV_QPT_XRC_SEND: return "XRC_SEND";
    case IBV_QPT_XRC_RECV: return "XRC_RECV";
    default: return "QP";
  }
}

const char* state_name(ibv_qp_state s) {
  static const char* const kNames[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
  return static_cast<unsigned>(s) < 7 ? kNames[s] : "?";
}

// Names the QP's track the first time it is used. Under g_mu.
void name_track(const Qp* qp) {
  const uint32_t qpn = qp->qp_base.qp_num;
  if (!g_named->insert(qpn).second) return;
  std::fprintf(g_out, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"args\":{\"name\":\"QP %#x %s\"}}",
               getpid(), qpn, qpn, type_name(qp->type));
}

// `s` as a JSON string's contents (quotes and backslashes escaped).
std::string json_text(const char* s) {
  std::string out;
  for (; *s; ++s) {
    if (*s == '"' || *s == '\\') out += '\\';
    if (static_cast<unsigned char>(*s) >= 0x20) out += *s;
  }
  return out;
}

// Each event reaches the file at once: a process killed mid-run (a server
// its client left, ^C) keeps its timeline up to then, less the closing
// bracket, which the format lets a reader do without. (A system call per
// event: the timeline is for looking, not for measuring.)
void flush() { std::fflush(g_out); }

void finish() {
  std::lock_guard g(g_mu);
  if (!g_out) return;
  std::fputs("\n]\n", g_out);
  std::fflush(g_out);
}

}  // namespace

void load() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string& prefix = knobs().trace;
    if (prefix.empty()) return;
    const std::string path = prefix + "." + std::to_string(getpid()) + ".json";
    g_out = std::fopen(path.c_str(), "w");
    if (!g_out) {
      SV_WARN("SOFTVERBS_TRACE: cannot write %s (%s): no timeline", path.c_str(), strerror(errno));
      return;
    }
    g_named = new std::unordered_set<uint32_t>;
    char exe[256] = "process";
    if (const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1); n > 0) exe[n] = 0;
    const char* base = std::strrchr(exe, '/');
    std::fprintf(g_out, "[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"%s %d\"}}", getpid(),
                 json_text(base ? base + 1 : exe).c_str(), getpid());
    std::atexit(finish);
    g_on = true;
    g_post_hooks = true;
    SV_INFO("SOFTVERBS_TRACE: the timeline goes to %s", path.c_str());
  });
}

void posted(Qp* qp, uint64_t pos) {
  if (!qp->trace_posted.empty()) qp->trace_posted[pos & qp->sq_mask] = monotonic_ns();
}

void done(Qp* qp, uint64_t pos, uint64_t wr_id, ibv_wr_opcode op, uint64_t bytes, ibv_wc_status status) {
  const uint64_t end = monotonic_ns();
  const uint64_t start = qp->trace_posted.empty() ? end : qp->trace_posted[pos & qp->sq_mask];
  std::lock_guard g(g_mu);
  if (!g_out) return;
  name_track(qp);
  std::fprintf(g_out,
               ",\n{\"name\":\"%s\",\"cat\":\"wr\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%u,"
               "\"args\":{\"wr_id\":\"%#lx\",\"bytes\":%lu,\"status\":\"%s\"}}",
               opcode_name(op), static_cast<double>(start) / 1000.0,
               static_cast<double>(end >= start ? end - start : 0) / 1000.0, getpid(), qp->qp_base.qp_num,
               static_cast<unsigned long>(wr_id), static_cast<unsigned long>(bytes), ibv_wc_status_str(status));
  flush();
}

void state(Qp* qp, ibv_qp_state s) {
  std::lock_guard g(g_mu);
  if (!g_out) return;
  name_track(qp);
  std::fprintf(g_out, ",\n{\"name\":\"%s\",\"cat\":\"state\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,\"pid\":%d,\"tid\":%u}",
               state_name(s), now_us(), getpid(), qp->qp_base.qp_num);
  flush();
}

void instant(const Qp* qp, const char* what, const char* detail) {
  std::lock_guard g(g_mu);
  if (!g_out) return;
  if (qp) name_track(qp);
  std::fprintf(g_out,
               ",\n{\"name\":\"%s\",\"cat\":\"event\",\"ph\":\"i\",\"s\":\"%s\",\"ts\":%.3f,\"pid\":%d,\"tid\":%u,"
               "\"args\":{\"detail\":\"%s\"}}",
               json_text(what).c_str(), qp ? "t" : "p", now_us(), getpid(), qp ? qp->qp_base.qp_num : 0,
               json_text(detail).c_str());
  flush();
}

void instant_qpn(uint32_t qpn, const char* what, const char* detail) {
  std::lock_guard g(g_mu);
  if (!g_out) return;
  std::fprintf(g_out,
               ",\n{\"name\":\"%s\",\"cat\":\"net\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,\"pid\":%d,\"tid\":%u,"
               "\"args\":{\"detail\":\"%s\"}}",
               json_text(what).c_str(), now_us(), getpid(), qpn, json_text(detail).c_str());
  flush();
}

void received(uint32_t qpn, uint64_t wr_id, uint32_t opcode, uint32_t bytes, uint32_t status, uint32_t src_qp) {
  if (!(opcode & IBV_WC_RECV)) return;  // (sends are traced from their post)
  std::lock_guard g(g_mu);
  if (!g_out) return;
  std::fprintf(g_out,
               ",\n{\"name\":\"%s\",\"cat\":\"recv\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,\"pid\":%d,\"tid\":%u,"
               "\"args\":{\"wr_id\":\"%#lx\",\"bytes\":%u,\"status\":\"%s\",\"src_qp\":\"%#x\"}}",
               opcode == IBV_WC_RECV_RDMA_WITH_IMM ? "RECV_RDMA_WITH_IMM" : "RECV", now_us(), getpid(), qpn,
               static_cast<unsigned long>(wr_id), bytes, ibv_wc_status_str(static_cast<ibv_wc_status>(status)), src_qp);
  flush();
}

void packets(uint32_t qpn, uint64_t sent, uint64_t received) {
  constexpr uint64_t kSampleNs = 1'000'000;
  static std::unordered_map<uint32_t, uint64_t>* last = new std::unordered_map<uint32_t, uint64_t>;
  const uint64_t now = monotonic_ns();
  std::lock_guard g(g_mu);
  if (!g_out) return;
  uint64_t& at = (*last)[qpn];
  if (now - at < kSampleNs) return;
  at = now;
  std::fprintf(g_out,
               ",\n{\"name\":\"QP %#x packets\",\"cat\":\"net\",\"ph\":\"C\",\"ts\":%.3f,\"pid\":%d,"
               "\"args\":{\"sent\":%lu,\"received\":%lu}}",
               qpn, static_cast<double>(now) / 1000.0, getpid(), static_cast<unsigned long>(sent),
               static_cast<unsigned long>(received));
  flush();
}

}  // namespace sv::trace
