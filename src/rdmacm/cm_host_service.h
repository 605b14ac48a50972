// The connection manager and the host service (shm/host_service.h): with a
// service running, every CM mailbox this process binds is claimed there
// too, so that the service hands the CM MADs it is for to our user alone,
// and a listener's port another user has is refused (EADDRINUSE) as a
// second bind of a port is. Without a service, nothing is claimed.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace sv::rdmacm {

// Whether a host service runs in this network namespace: other users'
// listeners on this host are then reached over QP1, through it.
bool host_service_runs();
// Claims mailbox `name`, bound on `fd`: 0 (claimed, or no service), or -1
// with errno EADDRINUSE (another user's CM has it) or EAGAIN (no answer).
int claim_mailbox(int fd, const std::string& name);
// Lets the claim made for `fd` go (at close).
void release_mailbox(int fd);
// Hands the service a RoCEv2 datagram (`len` bytes, ICRC included) for
// QP1 of this host, from `src`/`src_port` to `dst`: local processes reach
// each other only through it (the service drops UDP from local
// addresses). False when no service runs or it refused.
bool send_local_datagram(const in6_addr& src, uint16_t src_port, const in6_addr& dst, uint8_t tclass,
                         const uint8_t* data, size_t len);

}  // namespace sv::rdmacm
