// rsockets, datagram sockets (SOCK_DGRAM): a UDP socket gives the rsocket
// its number, its address and port, and carries the first datagram to each
// new peer; after that, datagrams travel over UD QPs (rsocket_dgram.cpp).
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "rsocket_state.h"

namespace sv::rdmacm::rs {

int dgram_create(RSocket& rs, int domain);  // rs.fd is the UDP socket
int dgram_bind(RSocket& rs, const sockaddr* addr, socklen_t len);
int dgram_connect(RSocket& rs, const sockaddr* addr, socklen_t len);
ssize_t dgram_send(RSocket& rs, const iovec* iov, int iovcnt, int flags, const sockaddr* dest,
                   socklen_t dest_len);
ssize_t dgram_recv(RSocket& rs, const iovec* iov, int iovcnt, int flags, sockaddr* src,
                   socklen_t* src_len);
short dgram_revents(RSocket& rs, short events);
void dgram_arm(RSocket& rs);
int dgram_sleep_fds(const RSocket& rs, pollfd* out);  // up to 2
void dgram_woken(RSocket& rs);                        // after the fds were readable
void dgram_close(RSocket& rs);

}  // namespace sv::rdmacm::rs
