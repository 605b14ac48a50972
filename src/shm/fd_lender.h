// The fd lender: how a process of ours reaches a peer's arena and doorbells
// when /proc/<pid>/fd/<n> is closed to it.
//
// Peers open each other's arena memfd and doorbell pipes through
// /proc/<pid>/fd (shm/peers.cpp), which the kernel allows when the caller
// may ptrace the owner. Between two processes of one user that is true,
// unless one of them is in a user namespace the other is not in: the
// kernel's capability check wants the same user namespace, or
// CAP_SYS_PTRACE over the owner's. softverbs-run puts each command of a
// plain user in a user namespace of its own (tools/run), so two such
// commands, or one and a process started with LD_LIBRARY_PATH, could not
// reach each other (EACCES), and their QPs ran out of retries.
//
// So every process lends its descriptors over a unix socket in the user's
// runtime directory (lend.<pid>, in a directory only we can enter): a
// thread that sleeps in accept() answers "fd N, inode I" with that
// descriptor (SCM_RIGHTS) when N is open here on inode I and the asker is
// our uid (SO_PEERCRED). It lends nothing /proc would not have given a
// process of ours outside a user namespace.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace sv::shm {

// Starts this process's lender (once per process: again in a fork child).
// False if it could not (no runtime directory): peers then have /proc only.
bool start_fd_lender();

// Asks process `owner`'s lender for its descriptor `fd`, which must be open
// on inode `ino` there. The descriptor (O_CLOEXEC), or -1 with errno set.
int borrow_fd(pid_t owner, int fd, uint64_t ino);

}  // namespace sv::shm
