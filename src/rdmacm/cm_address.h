// Socket-address helpers and the names of the rendezvous sockets.
//
// A listener (and an id bound with rdma_bind_addr) holds an
// abstract-namespace unix socket named
//   @softverbs-<domain>-cm-<ps>-<address>:<port>
// (address "0.0.0.0", "[::]", "*" for a dual-stack IPv6 wildcard, or the
// bound address). Holding the name reserves the port for its port space;
// listening on it makes the id reachable. Abstract names live in the
// network namespace, as IP addresses do, and vanish with their process.
#pragma once

#include <rdma/rdma_cma.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sv::rdmacm {

struct Id;

socklen_t address_length(const sockaddr* addr);
uint16_t address_port(const sockaddr* addr);  // host order
void set_address_port(sockaddr* addr, uint16_t port);
bool address_is_any(const sockaddr* addr);
bool address_is_multicast(const sockaddr* addr);
// A copy with IPv4-mapped IPv6 addresses turned into IPv4.
sockaddr_storage normalized(const sockaddr* addr);

// The socket name an id bound to `addr` holds (wildcard spelled per
// AFONLY): the rendezvous's ("cm"), or the network mailbox's ("gsi").
std::string bound_name(const Id* id, const sockaddr* addr, const char* kind = "cm");
// The names a connect to `dst` tries, most specific first.
std::vector<std::string> listener_names(rdma_port_space ps, const sockaddr* dst);
sockaddr_un unix_name(const std::string& name, socklen_t* len);
// A fresh unix SOCK_SEQPACKET socket of the rendezvous (non-blocking).
int rendezvous_socket();
// Binds `fd` to the abstract name `name`: 0, or -1 with errno (EADDRINUSE:
// some id holds it).
int try_bind(int fd, const std::string& name);
// try_bind for a name the application chose (its port): a client waiting
// for a listener probes the name by binding it for a moment
// (listener_port_held), and a bind that meets the probe tries again, for up
// to 31.5 ms, rather than fail with EADDRINUSE. (A ring of 4096 processes,
// each connecting to the next before it listened: one in a thousand
// listens failed.)
int bind_chosen_name(int fd, const std::string& name);

// Binds the id to `addr` (port 0: an ephemeral port, written back into the
// id's source address); sets up device, PD and GID when the address is not
// a wildcard. 0, or -1 with errno. `implicit`: bound by rdma_resolve_addr,
// so an ephemeral port is held by this process only, without a socket.
int bind_id(Id* id, const sockaddr* addr, bool implicit = false);
// A listener whose port is not held host-wide yet (implicit, or
// SO_REUSEADDR) takes its name now; an implicit port already taken by
// another process is picked again. 0, or -1 with errno.
int claim_port_name(Id* id);
// At destroy: an implicit port goes back.
void release_port(Id* id);

}  // namespace sv::rdmacm
