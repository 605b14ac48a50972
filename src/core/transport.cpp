#include "core/transport.h"

namespace sv {

std::atomic<bool> g_network_in_use{false};

}  // namespace sv
