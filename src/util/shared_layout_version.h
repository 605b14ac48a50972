// The version of the layout of everything processes share (shm/layout.h):
// in the names of the shared files, so builds with different layouts never
// open each other's. Here, below shm/, because librdmacm, which does not
// link shm/, names those files too (util/runtime_dir_rules.h). Bump it with
// any change to shm/layout.h.
#pragma once

#include <cstdint>

namespace sv {

inline constexpr uint32_t kSharedLayoutVersion = 10;

}  // namespace sv
