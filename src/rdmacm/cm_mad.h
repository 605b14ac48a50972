// The rendezvous messages (cm_wire.h) as IB CM MADs and back: what an id
// that talks to another host sends to its QP1 and reads from its mailbox
// (cm_network.cpp). The state machine (cm_protocol.cpp) sees the same
// WireMessage either way.
#pragma once

#include <optional>

#include "cm_state.h"
#include "cm_wire.h"
#include "ibcm/cm_messages.h"
#include "ibcm/gsi_mailbox.h"

namespace sv::rdmacm {

// The CM message for `msg`, from `id` to its peer (comm IDs, service ID,
// rdma_cm header, path from the id). nullopt for a message type the CM
// has no MAD for.
std::optional<ibcm::CmMessage> mad_from(const Id* id, const WireMessage& msg);

// The rendezvous message a received MAD stands for; `from` says where the
// packet came from (the peer's GID). nullopt for MADs the state machine
// does not take (MRA, DREP, unsupported transports).
std::optional<WireMessage> message_from_mad(const ibcm::CmMessage& mad, const ibcm::MailboxHeader& from);

}  // namespace sv::rdmacm
