// The objects a context's handles name, for ibv_import_pd / _mr / _dm.
//
// With a kernel driver, PDs, MRs and DMs belong to the context's file (its
// cmd_fd): ibv_import_device on a dup of that file gives another context on
// the same objects, and ibv_import_* gives a new userspace struct for an
// object found by its handle (pd->handle, mr->handle, dm->handle). Here all
// contexts of a process share its arena (each cmd_fd is a dup of the arena's
// memfd) and these objects are process-wide, so the "file" is the process:
// this table maps each live object's handle to the struct that owns it.
// Destroying any struct of an object (the original or an import) destroys
// the object, as the kernel does; the other structs then only unimport.
#pragma once

#include <cstdint>
#include <functional>

namespace sv {

struct Pd;
struct Mr;
struct Dm;

namespace handles {

enum class Kind { kPd, kMr, kDm };

// Makes `owner` the object behind `handle`; returns the serial that names
// this life of the handle (handles are reused, serials never).
uint64_t publish(Kind kind, uint32_t handle, void* owner);
// Removes the object if `serial` is still its life and returns its owner
// (whose resources the caller now releases); nullptr if it was gone.
void* retire(Kind kind, uint32_t handle, uint64_t serial);
// Calls `copy(owner, serial)` for a live object, under the table's lock (so
// the owner is not freed meanwhile). False if there is no such object.
bool visit(Kind kind, uint32_t handle, const std::function<void(void* owner, uint64_t serial)>& copy);

}  // namespace handles
}  // namespace sv
