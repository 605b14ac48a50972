#include "kernel_steering.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "hostd/datagram_route.h"
#include "shm/layout.h"
#include "transport/roce_socket.h"

namespace sv::hostd {
namespace {

constexpr bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn i{};
  i.code = code;
  i.dst_reg = dst & 0xf;
  i.src_reg = src & 0xf;
  i.off = off;
  i.imm = imm;
  return i;
}

// For a BPF_PROG_TYPE_SK_REUSEPORT program, the packet starts at the UDP
// header; the BTH follows it.
constexpr int32_t kUdpHeaderBytes = 8;

}  // namespace

KernelSteering::~KernelSteering() { reset(); }

void KernelSteering::reset() {
  if (prog_ >= 0) close(prog_);
  if (map_ >= 0) close(map_);
  prog_ = map_ = -1;
}

bool KernelSteering::attach(int service_fd) {
  map_ = bpf_map_create(BPF_MAP_TYPE_REUSEPORT_SOCKARRAY, "sv_slots", sizeof(uint32_t), sizeof(uint64_t),
                        shm::kHomeSlots, nullptr);
  if (map_ < 0) return false;
  // key = the slot byte of DestQP (datagram_route.h's rule: shm::home_slot_of_qpn);
  // select that member, else the service's (key 0), else drop.
  //   r6 = ctx; *(u64 *)(fp - 8) = 0
  //   r0 = skb_load_bytes(ctx, 8 + kDestQpSlotByte, fp - 8, 1); if r0 != 0: drop
  //   r0 = sk_select_reuseport(ctx, map, fp - 8, 0); if r0 == 0: pass
  //   *(u64 *)(fp - 8) = 0; r0 = sk_select_reuseport(ctx, map, fp - 8, 0); if r0 == 0: pass
  //   drop: r0 = SK_DROP; exit       pass: r0 = SK_PASS; exit
  static_assert(shm::home_slot_of_qpn(0xab0000) == 0xab && kDestQpSlotByte == 5, "the slot is DestQP's first byte");
  const bpf_insn ld_map[2] = {insn(BPF_LD | BPF_DW | BPF_IMM, 2, BPF_PSEUDO_MAP_FD, 0, map_), insn(0, 0, 0, 0, 0)};
  const bpf_insn prog[] = {
      insn(BPF_ALU64 | BPF_MOV | BPF_X, 6, 1, 0, 0),
      insn(BPF_ST | BPF_MEM | BPF_DW, 10, 0, -8, 0),
      insn(BPF_ALU64 | BPF_MOV | BPF_K, 2, 0, 0, kUdpHeaderBytes + kDestQpSlotByte),
      insn(BPF_ALU64 | BPF_MOV | BPF_X, 3, 10, 0, 0),
      insn(BPF_ALU64 | BPF_ADD | BPF_K, 3, 0, 0, -8),
      insn(BPF_ALU64 | BPF_MOV | BPF_K, 4, 0, 0, 1),
      insn(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_skb_load_bytes),
      insn(BPF_JMP | BPF_JNE | BPF_K, 0, 0, 17, 0),  // -> drop
      // the slot's member
      insn(BPF_ALU64 | BPF_MOV | BPF_X, 1, 6, 0, 0),
      ld_map[0], ld_map[1],
      insn(BPF_ALU64 | BPF_MOV | BPF_X, 3, 10, 0, 0),
      insn(BPF_ALU64 | BPF_ADD | BPF_K, 3, 0, 0, -8),
      insn(BPF_ALU64 | BPF_MOV | BPF_K, 4, 0, 0, 0),
      insn(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_sk_select_reuseport),
      insn(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 11, 0),  // -> pass
      // else the service's
      insn(BPF_ST | BPF_MEM | BPF_DW, 10, 0, -8, 0),
      insn(BPF_ALU64 | BPF_MOV | BPF_X, 1, 6, 0, 0),
      ld_map[0], ld_map[1],
      insn(BPF_ALU64 | BPF_MOV | BPF_X, 3, 10, 0, 0),
      insn(BPF_ALU64 | BPF_ADD | BPF_K, 3, 0, 0, -8),
      insn(BPF_ALU64 | BPF_MOV | BPF_K, 4, 0, 0, 0),
      insn(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_sk_select_reuseport),
      insn(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 2, 0),  // -> pass
      // drop:
      insn(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, SK_DROP),
      insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
      // pass:
      insn(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, SK_PASS),
      insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
  };
  prog_ = bpf_prog_load(BPF_PROG_TYPE_SK_REUSEPORT, "sv_steer", "GPL", prog, sizeof prog / sizeof prog[0], nullptr);
  if (prog_ < 0) return false;
  if (setsockopt(service_fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_EBPF, &prog_, sizeof prog_) != 0 ||
      !steer(0, service_fd)) {
    const int e = errno;
    close(prog_);
    prog_ = -1;
    errno = e;
    return false;
  }
  return true;
}

bool KernelSteering::steer(uint32_t slot, int member_fd) {
  const uint64_t fd = static_cast<uint64_t>(member_fd);
  return bpf_map_update_elem(map_, &slot, &fd, BPF_ANY) == 0;
}

void KernelSteering::unsteer(uint32_t slot) {
  if (map_ >= 0) bpf_map_delete_elem(map_, &slot);
}

int steered_member_socket(int family) { return roce_member_socket(family); }

}  // namespace sv::hostd
