// The attributes ibv_query_device(_ex) and ibv_query_port report, derived
// from limits.h so they always describe what the verbs really accept.
#pragma once

#include <infiniband/verbs.h>

namespace sv {

void fill_device_attr(ibv_device_attr* attr);
void fill_device_attr_ex(ibv_device_attr_ex* attr);
void fill_port_attr(ibv_port_attr* attr, int gid_count);

// "softverbs 0.1.0": the firmware version string.
const char* firmware_version();

}  // namespace sv
