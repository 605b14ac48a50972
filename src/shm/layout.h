// Every structure that lives in shared memory, described once, seen
// identically by the process that owns it and by every peer that maps it.
//
// Two kinds of shared memory exist (docs/ARCHITECTURE.md, "Shared state"):
//  * the host registry, /dev/shm/softverbs-<domain>: one ProcSlot per
//    attached process (pid, how to map its arena, a liveness lock);
//  * one arena per process: a memfd that holds the tables and queues that
//    peers must reach (QPs, receive queues, CQs, MR table, doorbells).
//
// Names are global per host, 24 bits as on the wire, and leased in blocks
// of 256 (shm/name_pool.h): a QPN or SRQ number is block << 8 | offset, an
// MR key block << 16 | offset << 8 | rotation. The registry says which slot
// holds each block (RegistryHeader::*_blocks), so a peer finds any object
// from its number with one load. The low 8 bits of a block are its column:
// column << 8 | offset is the object's index in its owner's table, so the
// owner needs no lookup at all. Slot s < 256 leases block s << 8 | column
// when it is free (its home block): QPNs are then slot << 16 | index, as
// the host service and its kernel steering read them (home_slot_of_qpn).
//
// Ordering rule: an owner fills an entry and then publishes its key/qpn with
// a release store; readers load it with acquire, read the fields, and re-check
// the key (entries may be reused after a quarantine period).
#pragma once

#include <infiniband/verbs.h>
#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "util/shared_layout_version.h"

namespace sv::shm {

inline constexpr uint64_t kRegistryMagic = 0x31676572'76667673ull;  // "svfvreg1"
inline constexpr uint64_t kArenaMagic = 0x31616e72'76667673ull;     // "svfvrna1"
// The version of everything in this file (util/shared_layout_version.h,
// which names the shared files, holds the number: bump it there).
inline constexpr uint32_t kLayoutVersion = kSharedLayoutVersion;

// Slot 0 is unused (block 0, QPNs 0 and 1, is no one's home): 4096 processes.
inline constexpr uint32_t kMaxProcs = 4097;
// Slots whose names can all be home blocks; the host service leases only these.
inline constexpr uint32_t kHomeSlots = 256;
inline constexpr uint32_t kMaxQps = 1u << 16;
inline constexpr uint32_t kMaxMrs = 1u << 16;
inline constexpr uint32_t kMaxSrqs = 1u << 16;
inline constexpr uint32_t kMaxContexts = 64;
inline constexpr uint32_t kMaxDoorbells = 4096;
inline constexpr uint32_t kAsyncRingSize = 256;

inline constexpr uint32_t kNameBlocks = 1u << 16;  // of each kind: QPNs, MR keys, SRQ numbers
inline constexpr uint32_t kBlockNames = 256;
// The block that holds the multicast QPN (0xffffff) is never leased for QPs.
inline constexpr uint32_t kMulticastQpnBlock = 0xffff;

inline constexpr uint32_t qpn_block(uint32_t qpn) { return (qpn >> 8) & 0xffff; }
inline constexpr uint32_t qpn_index(uint32_t qpn) { return qpn & 0xffff; }
inline constexpr uint32_t make_qpn(uint32_t block, uint32_t index) { return block << 8 | (index & 0xff); }
inline constexpr uint32_t key_block(uint32_t key) { return key >> 16; }
inline constexpr uint32_t key_index(uint32_t key) { return (key >> 8) & 0xffff; }
inline constexpr uint32_t make_key(uint32_t block, uint32_t index, uint32_t rot) {
  return block << 16 | (index & 0xff) << 8 | (rot & 0xff);
}
// The slot whose home block a name's block is: who holds it when the
// registry does not say (the host service's rule, where each user's
// registry knows only its own processes' blocks).
inline constexpr uint32_t home_slot_of_block(uint32_t block) { return block >> 8; }
inline constexpr uint32_t home_slot_of_qpn(uint32_t qpn) { return (qpn >> 16) & 0xff; }

// The slot that holds `block`: one load. A block the registry has not
// leased is taken to be its home slot's (0 for block 0..255: no one).
inline uint32_t block_owner(const std::atomic<uint32_t>* blocks, uint32_t block) {
  const uint32_t slot = blocks[block].load(std::memory_order_acquire);
  return slot ? (slot < kMaxProcs ? slot : 0) : home_slot_of_block(block);  // (a slot, whatever the word)
}

// ---------------------------------------------------------------- registry

enum ProcState : uint32_t { kProcFree = 0, kProcLive = 1 };

struct alignas(128) ProcSlot {
  // Robust, process-shared mutex held for the whole life of the owning
  // process by its keeper thread. When the process dies the kernel marks the
  // futex word FUTEX_OWNER_DIED: liveness without pids (no pid-reuse race).
  pthread_mutex_t alive;
  std::atomic<uint32_t> state;
  std::atomic<uint32_t> incarnation;  // bumped on every claim of the slot
  int32_t pid;
  int32_t arena_fd;    // fd number of the arena memfd in the owner
  uint64_t arena_ino;  // inode of that memfd: guards against fd/pid reuse
  uint64_t arena_size;
  uint64_t started_ns;  // CLOCK_REALTIME at claim, for diagnostics
  // Its network namespace (inode of /proc/self/ns/net; 0: unknown). A GID
  // of this host names a QP only in the namespace that has the address:
  // shared memory does not reach across namespaces (each is a host).
  uint64_t netns_ino;
  // How many blocks of names (shm/name_pool.h) the process leased: the
  // registry's tables are searched for a dead slot's only when it had some.
  std::atomic<uint32_t> name_blocks;
};
static_assert(sizeof(ProcSlot) == 128);

// Multicast groups of the host: which UD QPs (by QPN) are attached to which
// multicast GID. Membership of a dead process is ignored at delivery and
// cleaned up by the next attach.
inline constexpr uint32_t kMaxMcastGroups = 128;
inline constexpr uint32_t kMaxMcastMembers = 64;
inline constexpr uint32_t kMulticastQpn = 0xffffff;

struct McastGroup {
  ibv_gid gid;
  std::atomic<uint32_t> members[kMaxMcastMembers];  // QPNs, 0 = empty
};

struct McastTable {
  pthread_mutex_t lock;  // robust: attach/detach only; delivery reads without it
  McastGroup groups[kMaxMcastGroups];
};

// RDMA atomics on memory that peers reach with process_vm_readv/writev (not
// through a shared mapping, where CPU atomics do) take one of these locks,
// chosen by the target's (slot, address): atomic with respect to every other
// RDMA atomic of the host, as IBV_ATOMIC_HCA promises.
inline constexpr uint32_t kAtomicLockStripes = 64;

// XRC domains of the host (ibv_open_xrcd): one entry per domain, keyed by
// the inode of the file that names it (or by nothing, for a domain opened
// without a file: only its opener ever finds it). Members are processes
// (shared_lock.h holder words), one per open; a domain lives while one of
// them does. An XRC SRQ and an XRC_RECV QP carry the domain's id, and the
// responder delivers only when the two ids agree.
inline constexpr uint32_t kMaxXrcds = 64;
inline constexpr uint32_t kMaxXrcdMembers = 32;

struct XrcdEntry {
  uint64_t dev, ino;        // the naming file; 0, 0 for an anonymous domain
  uint32_t generation;      // bumped when the entry is reused: part of the id
  uint32_t anonymous;
  std::atomic<uint32_t> members[kMaxXrcdMembers];  // holder words, 0 = empty
};

struct XrcdTable {
  pthread_mutex_t lock;  // robust
  XrcdEntry entries[kMaxXrcds];
};

// A domain's id: never 0, unique among the domains that exist at once.
inline constexpr uint64_t xrcd_id(uint32_t index, uint32_t generation) {
  return uint64_t{generation} << 32 | (index + 1);
}

struct RegistryHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t header_size;
  uint64_t node_guid;  // stable per host, derived at creation
  // Held while a process claims a slot (Registry::claim). Robust: a claimer
  // that dies frees it; a waiter gives up after SOFTVERBS_ATTACH_WAIT_S,
  // with the holder's thread named, where a stopped or hung claimer (under
  // the flock this was) kept every later process of the namespace waiting
  // for ever, with nothing said.
  pthread_mutex_t claims;
  // Every slot from this one on has never been claimed (written under
  // `claims`; it only grows). A claim, and a sweep for live slots, read
  // the slots below it and no further: each page of slots a process reads
  // for the first time cost ~20 us on a VM with shadow page tables, and a
  // claim that read all 4096 slots (128 pages) was ~2.8 ms of each
  // process's start-up there.
  std::atomic<uint32_t> slots_used;
  // slots_used, in bounds: at least 1 (slot 0 is no process's), at most kMaxProcs.
  uint32_t slots_in_use() const {
    const uint32_t used = slots_used.load(std::memory_order_acquire);
    return used < 1 ? 1 : used > kMaxProcs ? kMaxProcs : used;
  }
  uint8_t reserved[4096 - 24 - sizeof(pthread_mutex_t) - sizeof(std::atomic<uint32_t>)];
  ProcSlot procs[kMaxProcs];
  McastTable mcast;
  pthread_mutex_t atomic_locks[kAtomicLockStripes];  // robust
  XrcdTable xrcds;
  // Which slot holds each block of names (0: none): shm/name_pool.h.
  std::atomic<uint32_t> qpn_blocks[kNameBlocks];
  std::atomic<uint32_t> key_blocks[kNameBlocks];
  std::atomic<uint32_t> srqn_blocks[kNameBlocks];
};
static_assert(offsetof(RegistryHeader, procs) == 4096);

// True while the process that claimed `slot` is alive.
inline bool proc_alive(const ProcSlot& slot) {
  // glibc keeps the futex word of a pthread mutex in its first int.
  static_assert(sizeof(pthread_mutex_t) >= sizeof(int));
  const auto* word = reinterpret_cast<const std::atomic<uint32_t>*>(&slot.alive);
  uint32_t w = word->load(std::memory_order_acquire);
  constexpr uint32_t kOwnerDied = 0x40000000u, kTidMask = 0x3fffffffu;
  return (w & kOwnerDied) == 0 && (w & kTidMask) != 0;
}

// ------------------------------------------------------------------ arena

struct QpSlotEntry {
  std::atomic<uint32_t> qpn;  // 0 = free
  uint32_t reserved;
  std::atomic<uint64_t> shared_off;  // arena offset of QpShared
};
static_assert(sizeof(QpSlotEntry) == 16);

struct SrqSlotEntry {
  std::atomic<uint32_t> srqn;  // 0 = free
  uint32_t reserved;
  std::atomic<uint64_t> shared_off;  // arena offset of RecvQueueShared
};

enum MrPath : uint32_t {
  kMrOverlay = 1,  // pages backed by the arena memfd: peers load/store directly
  kMrCma = 2,      // peers use process_vm_readv/writev on the owner's pid, or the owner's
                   // bounce service (below) where those calls are denied
  kMrLocalOnly = 3,  // only the owner can reach it (e.g. a peer-unreachable range)
  kMrOdp = 4,        // on-demand paging: the pages follow the application's mappings and
                     // may be absent; peers reach them as kMrCma, the owner through
                     // /proc/self/mem (util/self_mem.h), so absent pages fail, not fault
};

struct alignas(64) MrEntry {
  std::atomic<uint32_t> key;  // 0 = free; lkey == rkey
  uint32_t pd;
  uint32_t access;  // ibv_access_flags
  uint32_t path;    // MrPath
  uint64_t iova;    // address the keys' users see
  uint64_t length;
  uint64_t vaddr;        // owner's virtual address of iova
  uint64_t overlay_off;  // arena offset of the page holding overlay_page
  uint64_t overlay_page; // owner's page-aligned virtual address mapped at overlay_off
  uint64_t mw;           // 0 for an MR; a bound memory window: mw_word() below
};
static_assert(sizeof(MrEntry) == 64);

// A memory window shares the MR table (and so the key space): its entry
// copies the geometry of the part of the MR it is bound to, and says what it
// is: its type, the index of that MR, and for type 2 the QPN it is bound to
// (remote access must come through that QP).
inline constexpr uint64_t mw_word(uint32_t type, uint32_t mr_index, uint32_t qpn) {
  return uint64_t{type & 0xff} | uint64_t{mr_index & 0xffff} << 8 | uint64_t{qpn & 0xffffff} << 32;
}
inline constexpr uint32_t mw_type(uint64_t w) { return w & 0xff; }
inline constexpr uint32_t mw_mr_index(uint64_t w) { return (w >> 8) & 0xffff; }
inline constexpr uint32_t mw_qpn(uint64_t w) { return (w >> 32) & 0xffffff; }

struct DoorbellEntry {
  std::atomic<uint32_t> gen;  // 0 = free; odd values only
  int32_t write_fd;           // fd number (in the owner) of the pipe's write end
  uint64_t ino;               // inode of the pipe, checked by peers after open
};
static_assert(sizeof(DoorbellEntry) == 16);

// Where an async event is queued for a context, and how to wake its reader.
struct AsyncRecord {
  uint32_t event_type;  // ibv_event_type
  uint32_t kind;        // AsyncObject
  uint32_t id;          // qpn, srq number, or cq id
  uint32_t reserved;
};

enum AsyncObject : uint32_t { kAsyncDevice = 0, kAsyncQp = 1, kAsyncCq = 2, kAsyncSrq = 3, kAsyncPort = 4 };

struct alignas(64) ContextShared {
  std::atomic<uint32_t> in_use;
  uint32_t doorbell;      // index into the doorbell table
  uint32_t doorbell_gen;
  uint32_t reserved;
  alignas(64) pthread_mutex_t lock;  // robust: producers are peers
  std::atomic<uint64_t> head;        // consumer: the owner
  std::atomic<uint64_t> tail;
  std::atomic<uint64_t> dropped;     // events lost because the ring was full
  AsyncRecord ring[kAsyncRingSize];
};

struct ArenaHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t slot;
  uint32_t incarnation;
  int32_t pid;
  uint64_t size;
  uint64_t qp_table;     // QpSlotEntry[kMaxQps]
  uint64_t mr_table;     // MrEntry[kMaxMrs]
  uint64_t srq_table;    // SrqSlotEntry[kMaxSrqs]
  uint64_t doorbells;    // DoorbellEntry[kMaxDoorbells]
  uint64_t contexts;     // ContextShared[kMaxContexts]
  uint64_t heap_begin, heap_end;        // queues and object blocks
  uint64_t overlay_begin, overlay_end;  // pages overlaid on registered memory
  uint64_t bounce;                      // BounceShared
};

// ------------------------------------------------------------ bounce service
//
// How a peer reaches registered memory that is neither overlaid nor open to
// process_vm_readv/writev (a seccomp profile or ptrace policy denies them,
// or SOFTVERBS_MEM_PATH=bounce): it copies the bytes through a staging
// buffer in its own arena and asks the owner's bounce thread to copy them
// in or out (core/bounce_path.h). A request is one slot: the requester takes
// a free slot (holder), fills it, posts it (state) and rings the service's
// doorbell; the service copies, marks it done and wakes the requester (a
// futex on state).

inline constexpr uint32_t kBounceSlots = 64;
inline constexpr uint64_t kBounceChunk = 1u << 20;  // bytes per request at most

enum BounceOp : uint32_t { kBounceRead = 1, kBounceWrite = 2 };
enum BounceState : uint32_t { kBounceIdle = 0, kBouncePosted = 1, kBounceDone = 2, kBounceFailed = 3 };

struct alignas(64) BounceSlot {
  std::atomic<uint32_t> holder;  // lock_owner_id of the requester (shared_lock.h); 0 = free
  std::atomic<uint32_t> state;   // BounceState; the requester sleeps on it
  uint32_t op;                   // BounceOp, on the owner's memory
  uint32_t key;                  // the MR key the requester checked; the service checks it again
  uint64_t addr;                 // iova inside that MR
  uint64_t len;                  // <= kBounceChunk
  uint64_t staging_off;          // in the requester's arena
};
static_assert(sizeof(BounceSlot) == 64);

struct BounceShared {
  std::atomic<uint32_t> doorbell;  // the service's doorbell index + 1; 0 = no service yet
  std::atomic<uint32_t> doorbell_gen;
  BounceSlot slots[kBounceSlots];
};

// ------------------------------------------------------------ CQ

enum ArmState : uint32_t { kDisarmed = 0, kArmedNext = 1, kArmedSolicited = 2 };
enum CqFlags : uint32_t { kCqTimestamps = 1 };  // producers stamp completions (costs a clock read)

// What a completion says (everything ibv_wc and ibv_cq_ex can report).
struct CqeFields {
  uint64_t wr_id;
  uint16_t status;  // ibv_wc_status
  uint16_t opcode;  // ibv_wc_opcode
  uint32_t vendor_err;
  uint32_t byte_len;
  uint32_t imm_or_inv;  // imm_data (network order) or invalidated rkey
  uint32_t qp_num;
  uint32_t src_qp;
  uint32_t wc_flags;
  uint16_t pkey_index;
  uint16_t slid;
  uint8_t sl;
  uint8_t dlid_path_bits;
  uint8_t solicited;
  uint8_t flow_tagged;  // a raw receive steered by a tagged flow: imm_or_inv is the tag
  // A receive a peer delivered: the low 32 bits of the ring position + 1 of
  // the WQE it took from the QP's own receive queue or SRQ, 0 otherwise.
  // The owner's poller learns from it which WQEs are gone (RecvQueueShared
  // ::seen), as mlx5 learns it from its CQEs, and posting does not have to
  // read head, the line the peer's CAS keeps (core/recv_queue.h).
  uint32_t rq_pos;
  uint64_t ts_ns;  // CLOCK_MONOTONIC at completion
};
static_assert(sizeof(CqeFields) == 56);

// One completion slot of a shared ring: one cache line.
struct alignas(64) Cqe {
  std::atomic<uint64_t> seq;  // ring position + 1 once the entry is valid
  CqeFields f;
};
static_assert(sizeof(Cqe) == 64);

// The shared half of a CQ: the ring that peers write (receive completions of
// messages they delivered). Completions the owner produces itself go to a
// private ring (core/cq.h) so the two never contend for a cache line.
struct alignas(64) CqShared {
  uint32_t capacity;  // ring slots, power of two
  uint32_t cq_id;
  uint32_t ctx_index;
  std::atomic<uint32_t> doorbell;      // channel doorbell index + 1, 0 = none
  std::atomic<uint32_t> doorbell_gen;
  uint32_t flags;     // CqFlags
  uint64_t ring_off;  // Cqe[capacity]

  // Producers (peers, or the owner delivering to itself) serialize on this
  // shared_lock.h word. They publish an entry's seq first and then advance
  // tail; a producer that takes the lock over from a dead holder repairs a
  // published entry whose tail was not advanced.
  alignas(64) std::atomic<uint32_t> produce_lock;
  uint32_t reserved1;
  uint64_t tail;         // written under produce_lock (atomically: the owner reads it)
  uint64_t cached_head;  // producer's stale copy of head, refreshed when full

  alignas(64) std::atomic<uint64_t> head;  // consumer (owner) position

  alignas(64) std::atomic<uint32_t> armed;  // ArmState
  std::atomic<uint32_t> event_pending;      // set with a doorbell ring, cleared by get_cq_event
  std::atomic<uint32_t> overrun;            // a producer found the ring full
  std::atomic<uint32_t> attention;          // a peer flagged an error on a QP of this CQ
};

// ------------------------------------------------------------ receive queues

struct RecvWqe {
  std::atomic<uint64_t> seq;  // ring position + 1 once the WQE is posted
  uint64_t wr_id;
  uint32_t num_sge;
  uint32_t reserved;
  ibv_sge sge[];  // max_sge entries
};

// A receive queue (of one QP) or a shared receive queue. The owner posts
// WQEs (publishing each with its seq); whoever delivers a message (a peer,
// or the owner flushing) reads the WQE at head and claims it with one CAS on
// head. No lock: a consumer that dies after its CAS has consumed a WQE, as
// a NIC that crashed would have.
struct alignas(64) RecvQueueShared {
  uint32_t capacity;    // slots, power of two
  uint32_t max_sge;
  uint32_t stride;      // bytes per slot
  uint32_t is_srq;
  uint64_t ring_off;
  uint32_t srqn;        // for SRQs
  uint32_t pd;
  uint32_t ctx_index;
  uint32_t reserved;
  uint64_t xrcd_id;     // XRC SRQs: their domain (XrcdTable), else 0
  uint64_t cq_off;      // XRC SRQs: the CqShared their receive completions go to

  alignas(64) std::atomic<uint64_t> head;  // consumers: CAS

  alignas(64) std::atomic<uint64_t> tail;  // owner; read only to count what is queued
  // Owner only: a position head is known to have passed, learnt from
  // polled receive completions (CqeFields::rq_pos). Posting into a ring
  // that looks full checks it before it reads head.
  std::atomic<uint64_t> seen;

  alignas(64) std::atomic<uint32_t> limit;  // SRQ limit, 0 = not armed
  std::atomic<uint32_t> error;              // SRQ in error (CQ overrun etc.)
};

// ------------------------------------------------------------ QP

// What a peer needs to know about a QP to deliver to it.
struct alignas(64) QpShared {
  uint32_t qpn;
  uint32_t type;  // ibv_qp_type
  uint32_t pd;
  uint32_t ctx_index;
  std::atomic<uint32_t> state;  // ibv_qp_state, published last on modify
  uint32_t qkey;
  uint32_t dest_qpn;
  uint32_t access_flags;  // qp_access_flags: what remote peers may do
  uint32_t path_mtu;      // bytes
  uint32_t min_rnr_timer;
  uint32_t sgid_index;
  uint32_t max_dest_rd_atomic;  // responder resources: 0 refuses RDMA READ and atomics
  ibv_gid dgid;           // remote GID of a connected QP
  uint64_t rq_off;        // RecvQueueShared, or 0 if the QP uses an SRQ
  uint64_t srq_off;
  uint64_t recv_cq_off;   // CqShared
  std::atomic<uint32_t> remote_error;  // a peer's responder flagged an error
  std::atomic<uint32_t> established;   // a message arrived: COMM_EST was raised
  uint64_t xrcd_id;  // XRC_RECV QPs: their domain; messages go to that domain's SRQs
  uint32_t rq_psn;   // the first PSN expected from the network (RoCEv2 responder)
};

}  // namespace sv::shm
