// A work request (core/message.h Message) as the packetiser takes it
// (net/roce_packetiser.h Request): for the network requester
// (roce_sender.cpp) and the intra-host capture (shm_capture.cpp) alike.
#pragma once

#include "core/message.h"
#include "net/roce_packetiser.h"

namespace sv::roce {

// What a work request's packets say, but for where its PSNs start and its MTU.
inline net::Request request_of(const Message& m) {
  net::Request r;
  r.type = m.qp_type;
  r.opcode = m.opcode;
  r.src_qpn = m.src_qpn;
  r.dst_qpn = m.dst_qpn;
  r.qkey = m.qkey;
  r.xrc_srqn = m.xrc_srqn;
  r.imm = m.imm;
  r.solicited = m.solicited;
  r.remote_addr = m.remote_addr;
  r.rkey = m.rkey;
  r.compare_add = m.compare_add;
  r.swap = m.swap;
  r.length = m.length;
  return r;
}

}  // namespace sv::roce
