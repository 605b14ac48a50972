// Which network namespaces of this machine are still there, as far as this
// process can see: for sweeping the per-namespace state (registries, socket
// files, sysfs views) that processes of namespaces now gone left behind. A
// namespace lives while a process is in it or a mount holds it (`ip netns
// add` binds it under /run/netns with no process inside).
#pragma once

#include <cstdint>
#include <unordered_set>

namespace sv {

// The inodes of the namespaces that every process we may look at is in
// (/proc/<pid>/ns/net: those of our user that are dumpable, and more as
// root) and that our mount namespace's nsfs mounts hold. A namespace not in
// the set may still live, seen only by processes hidden from us (another
// pid namespace, another user's, a non-dumpable one): a sweep takes it for
// gone only where that cannot hurt (a registry, only with no live slot).
std::unordered_set<uint64_t> network_namespaces_in_use();

}  // namespace sv
