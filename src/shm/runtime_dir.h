// Where this user's softverbs state lives on the host: the registry (unless
// SOFTVERBS_DOMAIN names a shared one) and the RoCE counters files.
//
// /dev/shm is shared by every user and sticky: a name another user creates
// first stays theirs. So the state is a directory, created mode 0700 and
// then checked (a directory, ours, no access for others, not a link), and
// files are made inside it, where no one else can plant or replace one.
// Should another user hold the name, the state moves to a place only we can
// write: $XDG_RUNTIME_DIR/softverbs, else ~/.softverbs-runtime/<host>, with
// a warning (our processes that see neither would not find it).
// SOFTVERBS_RUNTIME_DIR chooses the directory outright. (The rules:
// util/runtime_dir_rules.h, which librdmacm follows too.)
#pragma once

#include <string>

namespace sv::shm {

// The directory, created if need be; "" (errno EACCES, or what mkdir said)
// when there is none we may trust. Chosen once per process (a failure is
// tried again at the next call).
const std::string& runtime_dir();

// Removes the files `<prefix><pid>` of the runtime directory whose process
// is gone (killed before its exit handlers could), as the next process that
// makes such a file of its own does.
void remove_files_of_dead_processes(const char* prefix);

}  // namespace sv::shm
