// Who is at the other end of a unix socket. The sockets processes of one
// user talk through (RoCE forwarding sockets, CM mailboxes and rendezvous)
// have abstract names any user of the network namespace can send to or
// connect to; what the kernel says of the sender is what decides whether
// the message is one of ours. Header-only: librdmacm uses it too.
#pragma once

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "util/knobs.h"
#include "util/runtime_dir_rules.h"

namespace sv {

// Asks the kernel to attach the sender's credentials to every message
// `fd` receives (SCM_CREDENTIALS), whether or not the sender sent them.
inline bool pass_credentials(int fd) {
  int on = 1;
  return setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) == 0;
}

// Room for the credentials message recvmsg fills in.
struct CredentialsBuffer {
  alignas(cmsghdr) char bytes[CMSG_SPACE(sizeof(ucred))];
  void attach(msghdr* m) {
    m->msg_control = bytes;
    m->msg_controllen = sizeof bytes;
  }
};

// The uid that sent a message received with pass_credentials on;
// UINT32_MAX when the kernel attached none (the option was off).
inline uint32_t sender_uid(msghdr* m) {
  for (cmsghdr* c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof(ucred))) {
      ucred u;
      __builtin_memcpy(&u, CMSG_DATA(c), sizeof u);
      return u.uid;
    }
  return UINT32_MAX;
}

// The uid of a connected stream or seqpacket peer (as it was at connect or
// listen); UINT32_MAX when unknown.
inline uint32_t peer_uid(int fd) {
  ucred u{};
  socklen_t len = sizeof u;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &u, &len) != 0 || len != sizeof u) return UINT32_MAX;
  return u.uid;
}

// A uid whose messages we take: our own; or, in a domain named on purpose
// (SOFTVERBS_DOMAIN) whose registry others may open (its creator's
// SOFTVERBS_DOMAIN_MODE), anyone's: its users opted in to sharing.
inline bool is_trusted_uid(uint32_t uid) {
  if (uid == geteuid()) return true;
  static const bool shared_domain = [] {
    if (!knobs().domain_named) return false;
    struct stat st;
    return stat(named_domain_registry(knobs().domain).c_str(), &st) == 0 && (st.st_mode & 066) != 0;
  }();
  return shared_domain;
}

}  // namespace sv
