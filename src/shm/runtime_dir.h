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

// The files a process keeps in the runtime directory, `<prefix><pid>`: its
// fd lender's socket (shm/fd_lender.h), fault control (core/fault_control.h)
// and RoCEv2 counters (transport/roce_counters.h). Its exit handlers remove
// them; those of a process killed first are removed by the next holder of
// its registry slot (remove_files_of_gone_process, Host::get), and all such
// files of processes that are gone by a namespace's first process
// (remove_files_of_dead_processes), which bounds what namespaces that are gone
// leave. (Every process used to read the whole directory and signal each
// file's pid: with 4096 processes, 33 million kill() calls in all.)
inline constexpr const char* kPidFilePrefixes[] = {"lend.", "ctl.", "net."};
void remove_files_of_dead_processes();
// True if the process is gone (or a zombie) and its files were removed.
bool remove_files_of_gone_process(int pid);

}  // namespace sv::shm
