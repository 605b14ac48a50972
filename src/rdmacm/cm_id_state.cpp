// The one place an id's state changes (cm_id_state.h).
#include "cm_id_state.h"

#include <cerrno>

#include "cm_state.h"
#include "util/log.h"

namespace sv::rdmacm {

void set_state(Id* id, IdState to, const char* why) {
  const IdState from = id->state;
  // Callers set a state between a failure and the errno they report; the
  // trace (its write(), the knobs it reads once) must not touch errno.
  const int saved_errno = errno;
  // A transition outside the table is named, never refused, so the table
  // cannot change what an application sees.
  SV_DEBUG("cm id %p: %s -> %s (%s)%s", static_cast<void*>(id), id_state_name(from), id_state_name(to), why,
           id_transition_expected(from, to) ? "" : " [not in id_transition_expected]");
  errno = saved_errno;
  id->state = to;
}

}  // namespace sv::rdmacm
