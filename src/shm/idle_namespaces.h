// This user's state of network namespaces that are gone, removed.
//
// Each network namespace is a host with a registry of its own
// (registry.v<layout>.net<inode>) and per-process socket files named by it
// (roce-<inode>-<slot>, gsi-<inode>-...) in the runtime directory. Their
// processes remove what they own as they exit, and the next process of the
// same namespace what a killed one left; but when the namespace itself goes
// (a test's `ip netns del`, a container's end) no process of it comes again,
// and its files stayed for ever: a machine that runs namespace tests
// gathered hundreds.
#pragma once

#include <string>

namespace sv::shm {

// Run by the first process of a namespace (the one that creates its
// registry): for every other namespace's registry of this layout in `dir`
// whose namespace no process or mount we can see is in
// (util/namespaces_in_use.h), and none of whose slots is live, the
// registry and the socket files named by that namespace are removed. Under
// that registry's flock and claims lock, taken without waiting: a process
// that opened it and waits for either finds it unlinked and opens the
// namespace's registry anew (Registry::open_or_create, Registry::claim), so
// no namespace is ever split between an old registry and a new one.
void remove_state_of_idle_namespaces(const std::string& dir);

// True when the registry of network namespace `netns` in `dir` (of this
// layout) is absent or holds no live slot: the sysfs view's sweep asks it
// too, for a namespace whose processes are hidden from it (in a pid
// namespace of their own).
bool namespace_registry_idle(const std::string& dir, uint64_t netns);

}  // namespace sv::shm
