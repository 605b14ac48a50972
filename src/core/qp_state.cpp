#include "core/qp_state.h"

namespace sv {
namespace {

constexpr unsigned kPkey = IBV_QP_PKEY_INDEX, kPort = IBV_QP_PORT, kQkey = IBV_QP_QKEY,
                   kAccess = IBV_QP_ACCESS_FLAGS, kAv = IBV_QP_AV, kMtu = IBV_QP_PATH_MTU,
                   kDest = IBV_QP_DEST_QPN, kRqPsn = IBV_QP_RQ_PSN, kSqPsn = IBV_QP_SQ_PSN,
                   kDestRd = IBV_QP_MAX_DEST_RD_ATOMIC, kRd = IBV_QP_MAX_QP_RD_ATOMIC,
                   kRnrTimer = IBV_QP_MIN_RNR_TIMER, kTimeout = IBV_QP_TIMEOUT, kRetry = IBV_QP_RETRY_CNT,
                   kRnrRetry = IBV_QP_RNR_RETRY, kAlt = IBV_QP_ALT_PATH, kCur = IBV_QP_CUR_STATE,
                   kMig = IBV_QP_PATH_MIG_STATE, kSqd = IBV_QP_EN_SQD_ASYNC_NOTIFY,
                   kRate = IBV_QP_RATE_LIMIT;

// Per-type masks for one transition, for the types this device knows (xi:
// XRC_SEND, the initiator; xt: XRC_RECV, the target), as Linux's table.
struct ByType {
  unsigned rc = 0, uc = 0, ud = 0, raw = 0, xi = 0, xt = 0;
  unsigned of(ibv_qp_type t) const {
    switch (t) {
      case IBV_QPT_RC:
        return rc;
      case IBV_QPT_UC:
        return uc;
      case IBV_QPT_UD:
        return ud;
      case IBV_QPT_RAW_PACKET:
        return raw;
      case IBV_QPT_XRC_SEND:
        return xi;
      case IBV_QPT_XRC_RECV:
        return xt;
      default:
        return 0;
    }
  }
};

struct Row {
  bool valid;
  ByType req, opt;
};

constexpr int kStates = IBV_QPS_ERR + 1;

// Indexed [from][to]; absent entries are invalid transitions.
constexpr Row kTable[kStates][kStates] = {
    /* RESET */ {
        /* RESET */ {true, {}, {}},
        /* INIT  */ {true,
                     {kPkey | kPort | kAccess, kPkey | kPort | kAccess, kPkey | kPort | kQkey, kPort,
                      kPkey | kPort | kAccess, kPkey | kPort | kAccess},
                     {}},
        /* RTR   */ {false, {}, {}},
        /* RTS   */ {false, {}, {}},
        /* SQD   */ {false, {}, {}},
        /* SQE   */ {false, {}, {}},
        // As in Linux's table (and so on every kernel-driven device): a QP
        // in RESET has nothing to flush and cannot be moved to ERR.
        /* ERR   */ {false, {}, {}},
    },
    /* INIT */ {
        /* RESET */ {true, {}, {}},
        /* INIT  */ {true, {},
                     {kPkey | kPort | kAccess, kPkey | kPort | kAccess, kPkey | kPort | kQkey, 0,
                      kPkey | kPort | kAccess, kPkey | kPort | kAccess}},
        /* RTR   */ {true,
                     {kAv | kMtu | kDest | kRqPsn | kDestRd | kRnrTimer, kAv | kMtu | kDest | kRqPsn, 0, 0,
                      kAv | kMtu | kDest | kRqPsn, kAv | kMtu | kDest | kRqPsn | kDestRd | kRnrTimer},
                     {kAlt | kAccess | kPkey, kAlt | kAccess | kPkey, kPkey | kQkey, 0, kAlt | kAccess | kPkey,
                      kAlt | kAccess | kPkey}},
        /* RTS   */ {false, {}, {}},
        /* SQD   */ {false, {}, {}},
        /* SQE   */ {false, {}, {}},
        /* ERR   */ {true, {}, {}},
    },
    /* RTR */ {
        /* RESET */ {true, {}, {}},
        /* INIT  */ {false, {}, {}},
        /* RTR   */ {false, {}, {}},
        /* RTS   */ {true,
                     {kTimeout | kRetry | kRnrRetry | kSqPsn | kRd, kSqPsn, kSqPsn, 0,
                      kTimeout | kRetry | kRnrRetry | kSqPsn | kRd, kTimeout | kSqPsn},
                     {kCur | kAlt | kAccess | kRnrTimer | kMig, kCur | kAlt | kAccess | kMig, kCur | kQkey, kRate,
                      kCur | kAlt | kAccess | kMig, kCur | kAlt | kAccess | kRnrTimer | kMig}},
        /* SQD   */ {false, {}, {}},
        /* SQE   */ {false, {}, {}},
        /* ERR   */ {true, {}, {}},
    },
    /* RTS */ {
        /* RESET */ {true, {}, {}},
        /* INIT  */ {false, {}, {}},
        /* RTR   */ {false, {}, {}},
        /* RTS   */ {true, {},
                     {kCur | kAccess | kAlt | kMig | kRnrTimer, kCur | kAccess | kAlt | kMig, kCur | kQkey, kRate,
                      kCur | kAccess | kAlt | kMig, kCur | kAccess | kAlt | kMig | kRnrTimer}},
        /* SQD   */ {true, {}, {kSqd, kSqd, kSqd, 0, kSqd, kSqd}},
        /* SQE   */ {false, {}, {}},
        /* ERR   */ {true, {}, {}},
    },
    /* SQD */ {
        /* RESET */ {true, {}, {}},
        /* INIT  */ {false, {}, {}},
        /* RTR   */ {false, {}, {}},
        /* RTS   */ {true, {},
                     {kCur | kAlt | kAccess | kRnrTimer | kMig, kCur | kAlt | kAccess | kMig, kCur | kQkey, 0,
                      kCur | kAlt | kAccess | kMig, kCur | kAlt | kAccess | kRnrTimer | kMig}},
        /* SQD   */ {true, {},
                     {kPort | kAv | kTimeout | kRetry | kRnrRetry | kRd | kDestRd | kAlt | kAccess | kPkey |
                          kRnrTimer | kMig,
                      kAv | kAlt | kAccess | kPkey | kMig, kPkey | kQkey, 0,
                      kPort | kAv | kTimeout | kRetry | kRnrRetry | kRd | kAlt | kAccess | kPkey | kMig,
                      kPort | kAv | kTimeout | kDestRd | kAlt | kAccess | kPkey | kRnrTimer | kMig}},
        /* SQE   */ {false, {}, {}},
        /* ERR   */ {true, {}, {}},
    },
    /* SQE */ {
        /* RESET */ {true, {}, {}},
        /* INIT  */ {false, {}, {}},
        /* RTR   */ {false, {}, {}},
        // RC QPs never enter SQE; the kernel table has no RC row here.
        /* RTS   */ {true, {}, {0, kCur | kAccess, kCur | kQkey, 0}},
        /* SQD   */ {false, {}, {}},
        /* SQE   */ {false, {}, {}},
        /* ERR   */ {true, {}, {}},
    },
    /* ERR */ {
        /* RESET */ {true, {}, {}},
        /* INIT  */ {false, {}, {}},
        /* RTR   */ {false, {}, {}},
        /* RTS   */ {false, {}, {}},
        /* SQD   */ {false, {}, {}},
        /* SQE   */ {false, {}, {}},
        /* ERR   */ {true, {}, {}},
    },
};

}  // namespace

QpTransition qp_transition(ibv_qp_state from, ibv_qp_state to, ibv_qp_type type) {
  if (from < 0 || from >= kStates || to < 0 || to >= kStates) return {};
  const Row& r = kTable[from][to];
  return QpTransition{r.valid, r.req.of(type), r.opt.of(type)};
}

bool qp_mask_ok(ibv_qp_state cur, ibv_qp_state next, ibv_qp_type type, unsigned mask) {
  if ((mask & IBV_QP_CUR_STATE) && cur != IBV_QPS_RTR && cur != IBV_QPS_RTS && cur != IBV_QPS_SQD &&
      cur != IBV_QPS_SQE)
    return false;
  QpTransition t = qp_transition(cur, next, type);
  if (!t.valid) return false;
  if ((mask & t.required) != t.required) return false;
  return (mask & ~(t.required | t.optional | IBV_QP_STATE)) == 0;
}

const char* qp_state_name(ibv_qp_state s) {
  static const char* const kNames[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
  return (s >= 0 && s < kStates) ? kNames[s] : "UNKNOWN";
}

}  // namespace sv
