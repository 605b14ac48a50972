// A responder's verdict on a message (core/message.h Outcome) as the AETH
// syndrome that carries it, and back: the responder (roce_receiver.cpp) and
// the intra-host capture (shm_capture.cpp) encode with it, the requester
// (roce_sender.cpp) decodes. IBTA vol 1, 9.7.5.2.
#pragma once

#include <cstdint>
#include <optional>

#include "core/message.h"
#include "net/roce_header.h"

namespace sv::roce {

// The NAK syndrome of a responder's error verdict (access, operational;
// anything else is an invalid request).
constexpr uint8_t nak_syndrome(Outcome o) {
  switch (o) {
    case Outcome::kRemoteAccess:
      return net::aeth_nak(net::NakCode::kRemoteAccessError);
    case Outcome::kRemoteOperational:
      return net::aeth_nak(net::NakCode::kRemoteOperationalError);
    default:
      return net::aeth_nak(net::NakCode::kInvalidRequest);
  }
}

// Verdicts the responder answers with a NAK that ends the message.
constexpr bool is_error_verdict(Outcome o) {
  return o == Outcome::kRemoteAccess || o == Outcome::kRemoteInvalid || o == Outcome::kRemoteOperational;
}

// The verdict an RNR NAK or an error NAK carries; nothing for an ACK, a
// sequence-error NAK (not a verdict: the requester goes back) or a reserved
// syndrome.
constexpr std::optional<Response> verdict_of(uint8_t syndrome) {
  switch (net::aeth_type(syndrome)) {
    case net::AethType::kRnrNak:
      return Response{Outcome::kRnr, net::aeth_value(syndrome)};
    case net::AethType::kNak:
      switch (static_cast<net::NakCode>(net::aeth_value(syndrome))) {
        case net::NakCode::kPsnSequenceError:
          return std::nullopt;
        case net::NakCode::kRemoteAccessError:
          return Response{Outcome::kRemoteAccess, 0};
        case net::NakCode::kRemoteOperationalError:
          return Response{Outcome::kRemoteOperational, 0};
        default:
          return Response{Outcome::kRemoteInvalid, 0};
      }
    default:
      return std::nullopt;
  }
}

}  // namespace sv::roce
