// The device as sysfs shows a NIC, for software that looks beyond the verbs
// API: Open MPI checks `<ibv_get_sysfs_path()>/class/infiniband`, UCX reads
// `/sys/class/infiniband/<dev>/ports/1/gid_attrs/types/N` (without it every
// GID is "RoCE v1" to UCX), libfabric and rdma-core's tests read
// `device/net/<ifname>`, `node_guid`, `numa_node` and the like.
//
// No process may add files to the real /sys, so the library writes the
// files a kernel driver would export into a directory of its own, the
// *view*: `/dev/shm/softverbs-uid<uid>.sysfs/net<netns inode>/` (one per
// network namespace, since each is a host with its own GIDs), laid out as
// /sys is. Every other entry of the view (class/net, devices, bus, ...) is a
// symbolic link to the real /sys, so a program given the view as its sysfs
// root still finds everything else. `softverbs-run` (tools/) mounts the
// view's class/infiniband and class/infiniband_verbs over /sys/class for a
// command, so programs that hard-code /sys see it too.
#pragma once

#include <string>

namespace sv::abi {

// The sysfs root the library reports (ibv_get_sysfs_path): $SYSFS_PATH if
// set (as rdma-core), else /sys if /sys/class/infiniband/<device> exists
// (softverbs-run, or a host set up system-wide), else the view (written
// first). Computed once per process.
const std::string& sysfs_root();

// Writes (or brings up to date) the files of the view: device and port
// attributes, the GID table with each GID's type and network device, P_Keys.
// Called when the device list is taken, so the GID files follow the host's
// addresses as the kernel's do. Returns the view's directory ("" if it
// could not be written; the reason is logged).
std::string refresh_sysfs_view();

}  // namespace sv::abi
