// The intra-host rendezvous: the messages two processes of one host
// exchange over a rendezvous connection and between their mailboxes
// (cm_link.h) to establish a connection. They carry what the IB CM's REQ/REP/RTU/REJ/DREQ
// and SIDR REQ/REP carry (docs/ARCHITECTURE.md, "Connection manager"), so
// the network CM drives the same state machine with real MADs (cm_mad.cpp
// turns each message into its MAD and back).
//
#pragma once

#include <infiniband/verbs.h>
#include <sys/socket.h>

#include <cstdint>

namespace sv::rdmacm {

// User-visible private data limits of the IB CM over RoCE (the CM message's
// private data minus the 36-byte rdma_cm header where the header applies).
// As with the kernel, the receiver's event reports the whole area, zero-padded.
inline constexpr unsigned kMaxPrivateData = 256;
inline constexpr uint8_t kReqPrivateData = 56;       // 92 - 36
inline constexpr uint8_t kRepPrivateData = 196;
inline constexpr uint8_t kRejPrivateData = 148;
inline constexpr uint8_t kSidrReqPrivateData = 180;  // 216 - 36
inline constexpr uint8_t kSidrRepPrivateData = 136;

// IB CM reject reasons that users see as RDMA_CM_EVENT_REJECTED status.
inline constexpr int kRejInvalidServiceId = 8;  // nobody listens on the port
inline constexpr int kRejConsumerDefined = 28;  // rdma_reject

inline constexpr unsigned kMailboxNameSize = 48;

// kGone: the sender's id was destroyed (over a link only; cm_link.h).
enum class MessageType : uint8_t { kReq = 1, kRep, kRtu, kRej, kDreq, kSidrReq, kSidrRep, kGone };

struct WireMessage {
  uint32_t magic = kMagic;
  uint32_t sender_ref = 0;    // the ids the message is from and for, on a
  uint32_t receiver_ref = 0;  // link (cm_link.h); 0: for the listener
  MessageType type{};
  uint8_t private_data_len = 0;
  uint8_t qp_type = 0;
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t flow_control = 0;
  uint8_t retry_count = 0;
  uint8_t rnr_retry_count = 0;
  uint8_t srq = 0;
  uint8_t path_mtu = 0;
  uint16_t reason = 0;  // REJ reason; SIDR REP status (0: accepted)
  uint32_t qp_num = 0;
  uint32_t psn = 0;
  uint32_t qkey = 0;
  uint32_t ece_vendor_id = 0;
  uint32_t ece_options = 0;
  ibv_gid sender_gid{};
  sockaddr_storage sender_addr{};    // the sender's address and port
  sockaddr_storage receiver_addr{};  // the address the sender aimed at
  uint8_t private_data[kMaxPrivateData]{};
  // The sender process's mailbox (cm_link.cpp), where the ids' messages go
  // once the REQ is answered (NUL-terminated).
  char sender_mailbox[kMailboxNameSize]{};

  static constexpr uint32_t kMagic = 0x53564333;  // "SVC3"
};

}  // namespace sv::rdmacm
