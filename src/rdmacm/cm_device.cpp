// Device table of the connection manager (see cm_device.h).
#include "cm_device.h"

#include <fcntl.h>
#include <netinet/in.h>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

namespace sv::rdmacm {
namespace {

std::vector<Device>* open_all();

// A fork child cannot use its parent's contexts (their queues live in
// memory the child does not inherit), so it opens its own on first use.
std::vector<Device>& table() {
  static std::mutex mutex;
  static std::vector<Device>* devices = nullptr;
  static pid_t owner = 0;
  std::lock_guard lock(mutex);
  if (!devices || owner != getpid()) {
    devices = open_all();  // the parent's table, if any, is left alone: never freed
    owner = getpid();
  }
  return *devices;
}

std::vector<Device>* open_all() {
  {
    auto* list = new std::vector<Device>;  // never freed: contexts outlive every id
    int count = 0;
    ibv_device** verbs_devices = ibv_get_device_list(&count);
    if (!verbs_devices) return list;
    for (int i = 0; i < count; ++i) {
      ibv_context* context = ibv_open_device(verbs_devices[i]);
      if (!context) continue;
      Device dev;
      dev.context = context;
      ibv_device_attr attr{};
      if (ibv_query_device(context, &attr) == 0) {
        dev.max_initiator_depth = static_cast<uint8_t>(attr.max_qp_init_rd_atom);
        dev.max_responder_resources = static_cast<uint8_t>(attr.max_qp_rd_atom);
      }
      ibv_port_attr port{};
      if (ibv_query_port(context, 1, &port) == 0) {
        dev.active_mtu = port.active_mtu;
        dev.gid_table_len = port.gid_tbl_len;
      }
      list->push_back(dev);
    }
    ibv_free_device_list(verbs_devices);
    return list;
  }
}

std::mutex pd_mutex;

}  // namespace

bool is_loopback(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) {
    auto* sin = reinterpret_cast<const sockaddr_in*>(addr);
    return (ntohl(sin->sin_addr.s_addr) >> 24) == 127;
  }
  auto* sin6 = reinterpret_cast<const sockaddr_in6*>(addr);
  return IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr) ||
         (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr) && sin6->sin6_addr.s6_addr[12] == 127);
}

ibv_gid address_to_gid(const sockaddr* addr) {
  ibv_gid gid{};
  if (addr->sa_family == AF_INET) {
    auto* sin = reinterpret_cast<const sockaddr_in*>(addr);
    gid.raw[10] = gid.raw[11] = 0xff;
    std::memcpy(&gid.raw[12], &sin->sin_addr, 4);
  } else if (addr->sa_family == AF_INET6) {
    std::memcpy(gid.raw, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, 16);
  }
  return gid;
}

int find_gid_index(ibv_context* context, int table_len, const ibv_gid& wanted) {
  for (int i = 0; i < table_len; ++i) {
    ibv_gid gid{};
    if (ibv_query_gid(context, 1, i, &gid) == 0 && std::memcmp(gid.raw, wanted.raw, sizeof gid.raw) == 0) return i;
  }
  return -1;
}

bool find_device(const sockaddr* addr, Device** device, int* gid_index) {
  if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) {
    errno = EAFNOSUPPORT;
    return false;
  }
  const ibv_gid wanted = address_to_gid(addr);
  for (Device& dev : table()) {
    if (const int i = find_gid_index(dev.context, dev.gid_table_len, wanted); i >= 0) {
      *device = &dev;
      *gid_index = i;
      return true;
    }
  }
  if (is_loopback(addr) && !table().empty()) {
    *device = &table().front();
    *gid_index = 0;
    return true;
  }
  errno = ENODEV;
  return false;
}

ibv_pd* default_pd(Device* device) {
  std::lock_guard lock(pd_mutex);
  if (!device->pd) device->pd = ibv_alloc_pd(device->context);
  return device->pd;
}

ibv_xrcd* default_xrcd(Device* device) {
  std::lock_guard lock(pd_mutex);
  if (!device->xrcd) {
    ibv_xrcd_init_attr attr{};
    attr.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
    attr.fd = -1;
    attr.oflags = O_CREAT;
    device->xrcd = ibv_open_xrcd(device->context, &attr);
  }
  return device->xrcd;
}

Device* first_device() {
  auto& devices = table();
  if (devices.empty()) {
    errno = ENODEV;
    return nullptr;
  }
  return &devices.front();
}

int device_count() { return static_cast<int>(table().size()); }

ibv_context* device_context(int index) { return table().at(static_cast<std::size_t>(index)).context; }

Device* device_of(ibv_context* context) {
  for (Device& dev : table())
    if (dev.context == context) return &dev;
  return nullptr;
}

}  // namespace sv::rdmacm
