// Holds this namespace's registry claims lock (RegistryHeader::claims) and
// sleeps, as a process stopped or hung in the middle of its slot claim
// would: for registry_claim_stuck.sh.
#include <pthread.h>
#include <unistd.h>

#include <cstdio>

#include "shm/registry.h"

int main() {
  sv::shm::Registry* r = sv::shm::Registry::open_or_create();
  if (!r) return 1;
  if (pthread_mutex_lock(&r->header()->claims) != 0) return 1;
  std::printf("holding\n");
  std::fflush(stdout);
  pause();
  return 0;
}
