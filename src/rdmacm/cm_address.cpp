// rdma_bind_addr, rdma_resolve_addr, rdma_resolve_route, and the address
// and socket-name helpers of cm_address.h.
#include "cm_faults.h"
#include "cm_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

#include "c_boundary.h"
#include "cm_device.h"
#include "cm_protocol.h"
#include "cm_state.h"
#include "ibcm/gsi_mailbox.h"
#include "util/kernel_socket.h"
#include "util/private_heap.h"
#include "util/unix_socket_address.h"

namespace sv::rdmacm {
namespace {

uint16_t ephemeral_port() {
  static std::mt19937 rng{std::random_device{}()};
  return static_cast<uint16_t>(32768 + rng() % (60999 - 32768 + 1));
}

}  // namespace

int try_bind(int fd, const std::string& name) {
  socklen_t len;
  sockaddr_un un = unix_name(name, &len);
  return bind(fd, reinterpret_cast<sockaddr*>(&un), len);
}

int bind_chosen_name(int fd, const std::string& name) {
  for (unsigned wait_us = 500;; wait_us *= 2) {
    const int rc = try_bind(fd, name);
    if (rc == 0 || errno != EADDRINUSE || wait_us > 16000) return rc;
    usleep(wait_us);
  }
}

namespace {

// The source address the kernel's routing picks for `dst` (a connected UDP
// socket's local address), as rdma_resolve_addr does without a source.
int route_source(const sockaddr* dst, sockaddr_storage* src) {
  sockaddr_storage target = normalized(dst);
  if (address_is_any(reinterpret_cast<sockaddr*>(&target))) {
    // As the kernel, a wildcard destination means this host.
    if (target.ss_family == AF_INET)
      reinterpret_cast<sockaddr_in*>(&target)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    else
      reinterpret_cast<sockaddr_in6*>(&target)->sin6_addr = in6addr_loopback;
  }
  if (address_port(reinterpret_cast<sockaddr*>(&target)) == 0)
    set_address_port(reinterpret_cast<sockaddr*>(&target), 9);  // any port will do for a route
  int fd = sv::kernel_socket(target.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  socklen_t len = sizeof *src;
  int rc = connect(fd, reinterpret_cast<sockaddr*>(&target),
                   address_length(reinterpret_cast<sockaddr*>(&target)));
  if (rc == 0) rc = getsockname(fd, reinterpret_cast<sockaddr*>(src), &len);
  int err = errno;
  close(fd);
  errno = err;
  if (rc != 0) return -1;
  set_address_port(reinterpret_cast<sockaddr*>(src), 0);
  return 0;
}

}  // namespace

socklen_t address_length(const sockaddr* addr) {
  return addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

uint16_t address_port(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(addr)->sin_port);
  if (addr->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(addr)->sin6_port);
  return 0;
}

void set_address_port(sockaddr* addr, uint16_t port) {
  if (addr->sa_family == AF_INET) reinterpret_cast<sockaddr_in*>(addr)->sin_port = htons(port);
  if (addr->sa_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(addr)->sin6_port = htons(port);
}

bool address_is_any(const sockaddr* addr) {
  if (addr->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr == htonl(INADDR_ANY);
  if (addr->sa_family == AF_INET6)
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr);
  return false;
}

bool address_is_multicast(const sockaddr* addr) {
  sockaddr_storage norm = normalized(addr);
  if (norm.ss_family == AF_INET)
    return IN_MULTICAST(ntohl(reinterpret_cast<sockaddr_in*>(&norm)->sin_addr.s_addr));
  return IN6_IS_ADDR_MULTICAST(&reinterpret_cast<sockaddr_in6*>(&norm)->sin6_addr);
}

sockaddr_storage normalized(const sockaddr* addr) {
  sockaddr_storage out{};
  if (addr->sa_family == AF_INET6) {
    auto* sin6 = reinterpret_cast<const sockaddr_in6*>(addr);
    if (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
      auto* sin = reinterpret_cast<sockaddr_in*>(&out);
      sin->sin_family = AF_INET;
      sin->sin_port = sin6->sin6_port;
      std::memcpy(&sin->sin_addr, &sin6->sin6_addr.s6_addr[12], 4);
      return out;
    }
  }
  std::memcpy(&out, addr, address_length(addr));
  return out;
}

std::string bound_name(const Id* id, const sockaddr* addr, const char* kind) {
  std::string address = ibcm::address_text(addr);
  if (addr->sa_family == AF_INET6 && address_is_any(addr) && id->afonly != 1) address = "*";
  return ibcm::service_name(kind, static_cast<uint16_t>(id->pub.ps), address, address_port(addr));
}

std::vector<std::string> listener_names(rdma_port_space ps, const sockaddr* dst) {
  return ibcm::service_names("cm", static_cast<uint16_t>(ps), dst);
}

sockaddr_un unix_name(const std::string& name, socklen_t* len) { return sv::abstract_unix_address(name, len); }

namespace {

// The ports this process picked for ids bound implicitly (by
// rdma_resolve_addr): by port space and port, so no two of its ids share one.
PrivateSet<uint32_t>& implicit_ports() {
  static auto* set = new_private<PrivateSet<uint32_t>>();
  return *set;
}

uint32_t port_key(const Id* id, uint16_t port) { return (uint32_t{static_cast<uint16_t>(id->pub.ps)} << 16) | port; }

// An ephemeral port none of this process's implicit binds has in `id`'s
// port space, now taken; 0 when none was found.
uint16_t take_implicit_port(const Id* id) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    const uint16_t port = ephemeral_port();
    if (implicit_ports().insert(port_key(id, port)).second) return port;
  }
  return 0;
}

}  // namespace

int rendezvous_socket() { return socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0); }

int bind_id(Id* id, const sockaddr* addr, bool implicit) {
  if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) return fail(EAFNOSUPPORT);
  Device* device = nullptr;
  int gid_index = 0;
  // A loopback address binds without a device, as a wildcard does (the
  // classic rdma_cm: rdma_bind_addr succeeds and id->verbs stays NULL);
  // resolving or an incoming request attaches one. libfabric's verbs
  // provider relies on it: with no address given it binds "localhost", and
  // only a NULL id->verbs makes it advertise the device's own addresses
  // instead of 127.0.0.1, which peers on other hosts cannot reach.
  if (!address_is_any(addr) && !is_loopback(addr) && !find_device(addr, &device, &gid_index)) return -1;

  sockaddr_storage local{};
  std::memcpy(&local, addr, address_length(addr));
  auto* local_addr = reinterpret_cast<sockaddr*>(&local);
  const bool pick_port = address_port(addr) == 0;
  if (pick_port && implicit) {
    // The source port of an id that connects: no other process needs to
    // see it taken (its messages are told apart by link or communication
    // ID, never by port), so it costs no socket; it is claimed host-wide
    // only if the id listens after all (claim_port_name).
    const uint16_t port = take_implicit_port(id);
    if (!port) return fail(EADDRINUSE);
    set_address_port(local_addr, port);
    id->ephemeral = true;
  } else {
    int fd = rendezvous_socket();
    if (fd < 0) return -1;
    int rc = -1;
    for (int attempt = 0; attempt < (pick_port ? 200 : 1); ++attempt) {
      if (pick_port) set_address_port(local_addr, ephemeral_port());
      // (With SO_REUSEADDR a held port binds anyway: no wait for it.)
      const std::string name = bound_name(id, local_addr);
      rc = pick_port || id->reuseaddr ? try_bind(fd, name) : bind_chosen_name(fd, name);
      if (rc == 0 || errno != EADDRINUSE) break;
    }
    if (rc != 0) {
      // SO_REUSEADDR semantics: another id may hold the port; a listener
      // claims the name again in rdma_listen.
      if (!(id->reuseaddr && errno == EADDRINUSE)) {
        int err = errno;
        close(fd);
        return fail(err);
      }
    } else {
      id->sock = fd;
      fd = -1;
    }
    if (fd >= 0) {
      close(fd);
      id->sock = rendezvous_socket();
    }
  }

  std::memcpy(&id->pub.route.addr.src_storage, &local, sizeof local);
  if (device) {
    id->device = device;
    id->gid_index = gid_index;
    id->pub.verbs = device->context;
    id->pub.port_num = 1;
    id->pub.pd = default_pd(device);
    ibv_query_gid(device->context, 1, gid_index, &id->pub.route.addr.addr.ibaddr.sgid);
    id->pub.route.addr.addr.ibaddr.pkey = 0xffff;
    id->path_mtu = device->active_mtu;
  }
  set_state(id, IdState::kAddrBound, "address bound");
  return 0;
}

int claim_port_name(Id* id) {
  int fd = rendezvous_socket();
  if (fd < 0) return -1;
  auto* local = &id->pub.route.addr.src_addr;
  int rc = -1;
  const int attempts = id->ephemeral ? 200 : 1;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    if (attempt) {  // the port this process picked is another's: pick again
      release_port(id);
      const uint16_t port = take_implicit_port(id);
      if (!port) break;
      set_address_port(local, port);
      id->ephemeral = true;
    }
    rc = id->ephemeral ? try_bind(fd, bound_name(id, local)) : bind_chosen_name(fd, bound_name(id, local));
    if (rc == 0 || errno != EADDRINUSE) break;
  }
  if (rc != 0) {
    const int err = errno;
    close(fd);
    return fail(err);
  }
  id->sock = fd;
  return 0;
}

void release_port(Id* id) {
  if (!id->ephemeral) return;
  implicit_ports().erase(port_key(id, address_port(&id->pub.route.addr.src_addr)));
  id->ephemeral = false;
}

}  // namespace sv::rdmacm

using namespace sv::rdmacm;

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_bind_addr(struct rdma_cm_id* cm_id,
                                                      struct sockaddr* addr) {
  if (!cm_id || !addr) return fail(EINVAL);
  if (int e = call_fault(sv::faults::Call::kRdmaBindAddr)) return fail(e);  // (SOFTVERBS_FAULTS)
  return guarded(-1, [&] {
    CmLock lock(cm_mutex());
    Id* id = id_of(cm_id);
    if (id->state != IdState::kIdle) return fail(EINVAL);
    return bind_id(id, addr);
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_resolve_addr(struct rdma_cm_id* cm_id,
                                                         struct sockaddr* src_addr,
                                                         struct sockaddr* dst_addr,
                                                         int timeout_ms) {
  if (!cm_id || !dst_addr) return fail(EINVAL);
  if (int e = call_fault(sv::faults::Call::kRdmaResolveAddr)) return fail(e);  // (SOFTVERBS_FAULTS)
  return guarded(-1, [&] {
    CmLock lock(cm_mutex());
    Id* id = id_of(cm_id);
    if (id->state != IdState::kIdle && id->state != IdState::kAddrBound) return fail(EINVAL);
    if (dst_addr->sa_family != AF_INET && dst_addr->sa_family != AF_INET6)
      return fail(EAFNOSUPPORT);
    if (id->state == IdState::kIdle) {
      sockaddr_storage src{};
      if (src_addr && src_addr->sa_family != AF_UNSPEC) {
        std::memcpy(&src, src_addr, address_length(src_addr));
      } else if (route_source(dst_addr, &src) != 0) {
        // Multicast destinations without a route use this host's first
        // address (mckey on a host with only loopback).
        if (!address_is_multicast(dst_addr)) return -1;
        src = {};
        auto* sin = reinterpret_cast<sockaddr_in*>(&src);
        sin->sin_family = AF_INET;
        sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      }
      if (bind_id(id, reinterpret_cast<sockaddr*>(&src), /*implicit=*/true) != 0) return -1;
    }
    if (!id->device) {
      // Bound to a wildcard: the route picks the device; to a loopback
      // address: that address does.
      sockaddr_storage src = id->pub.route.addr.src_storage;
      Device* device = nullptr;
      int gid_index = 0;
      if (address_is_any(reinterpret_cast<sockaddr*>(&src)) && route_source(dst_addr, &src) != 0) return -1;
      if (!find_device(reinterpret_cast<sockaddr*>(&src), &device, &gid_index)) return -1;
      id->device = device;
      id->gid_index = gid_index;
      id->pub.verbs = device->context;
      id->pub.port_num = 1;
      id->pub.pd = default_pd(device);
      id->path_mtu = device->active_mtu;
      ibv_query_gid(device->context, 1, gid_index, &id->pub.route.addr.addr.ibaddr.sgid);
      id->pub.route.addr.addr.ibaddr.pkey = 0xffff;
    }
    std::memcpy(&id->pub.route.addr.dst_storage, dst_addr, address_length(dst_addr));
    id->pub.route.addr.addr.ibaddr.dgid = address_to_gid(dst_addr);

    // The kernel would now resolve the next hop's MAC address (ARP/ND);
    // UDP sockets leave that to the kernel when the first packet goes, so
    // a destination with a route resolves at once (no packet is sent).
    (void)timeout_ms;
    set_state(id, IdState::kAddrResolved, "rdma_resolve_addr");
    queue_event(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
    lock.unlock();
    return complete_sync(id);
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_resolve_route(struct rdma_cm_id* cm_id, int timeout_ms) {
  if (!cm_id) return fail(EINVAL);
  if (int e = call_fault(sv::faults::Call::kRdmaResolveRoute)) return fail(e);  // (SOFTVERBS_FAULTS)
  return guarded(-1, [&] {
    CmLock lock(cm_mutex());
    Id* id = id_of(cm_id);
    if (id->state != IdState::kAddrResolved) return fail(EINVAL);
    fill_route(id);
    if (!id->pub.route.path_rec) return fail(ENOMEM);
    set_state(id, IdState::kRouteResolved, "rdma_resolve_route");
    queue_event(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
    lock.unlock();
    return complete_sync(id);
  });
}
