// The verbs devices the connection manager binds ids to, opened once for
// the life of the process (as rdma-core does: id->verbs must stay valid for
// every id), and the mapping from IP addresses to a device and GID.
#pragma once

#include <infiniband/verbs.h>
#include <sys/socket.h>

#include <cstdint>

namespace sv::rdmacm {

struct Device {
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;  // the default PD, allocated on first use
  ibv_xrcd* xrcd = nullptr;  // the XRC domain of XRC ids, opened on first use
  uint8_t max_initiator_depth = 0;
  uint8_t max_responder_resources = 0;
  ibv_mtu active_mtu = IBV_MTU_1024;
  int gid_table_len = 0;
  // A UD QP held while the CM may hear from the network (cm_network.cpp):
  // the network transport runs in a process only while it has a QP that
  // other hosts can reach, and the CM's QP1 traffic needs it running.
  ibv_cq* anchor_cq = nullptr;
  ibv_qp* anchor_qp = nullptr;
};

// 127/8, ::1 and ::ffff:127.x.y.z.
bool is_loopback(const sockaddr* addr);

// The RoCE GID of an IP address: IPv4 as ::ffff:a.b.c.d, IPv6 as itself.
ibv_gid address_to_gid(const sockaddr* addr);

// The index of `gid` among the first `table_len` GIDs of port 1 of
// `context`, or -1.
int find_gid_index(ibv_context* context, int table_len, const ibv_gid& gid);

// The device and GID index that own `addr`. A loopback address (127/8, ::1)
// that has no GID of its own uses the device's first GID, as the kernel
// binds loopback to the first device. False (errno ENODEV) if none.
bool find_device(const sockaddr* addr, Device** device, int* gid_index);

// The default PD of `device` (one per device, as the man page says);
// nullptr with errno on failure.
ibv_pd* default_pd(Device* device);

// The device's XRC domain for ids that bring none (as rdma-core's
// ucma_get_xrcd: an anonymous one, opened once); nullptr with errno.
ibv_xrcd* default_xrcd(Device* device);

// Any device (the first), for ids bound to a wildcard address that need one.
Device* first_device();

// How many devices the table holds, and the context of each: what
// rdma_get_devices hands out (contexts that live as long as the library).
int device_count();
ibv_context* device_context(int index);

// The device an ibv_context belongs to, or nullptr.
Device* device_of(ibv_context* context);

}  // namespace sv::rdmacm
