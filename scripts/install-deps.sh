#!/usr/bin/env bash
# Installs what softverbs needs on Debian 12.
#   install-deps.sh           everything: to build, and to run every test and
#                             benchmark (compilers and CMake, the rdma-core
#                             headers we implement, GoogleTest, and the Debian
#                             RDMA clients and middleware the tests run unmodified)
#   install-deps.sh --build   only what building the libraries, the tools and
#                             the Debian package needs (configure with
#                             -DBUILD_TESTING=OFF; README, "Installing")
# Runs apt-get as root (through sudo when not root).
set -euo pipefail
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
build_packages=(
  cmake g++ make pkg-config binutils zlib1g-dev
  libisal-dev                           # ISA-L's CRC-32 (PCLMUL) for the RoCEv2 ICRC
  liburing-dev                          # io_uring: an empty poll without a system call (src/transport/receive_watch.h)
  libbpf-dev                            # the host service's steering program (tools/hostd/kernel_steering.h)
  libibverbs-dev librdmacm-dev          # the headers of the ABI we provide
  dpkg-dev file                         # cpack's DEB generator: dpkg-shlibdeps writes the package's Depends
)
test_packages=(
  ibverbs-utils rdmacm-utils perftest   # Debian's clients, run unmodified in tests
  libgtest-dev libgmock-dev libbenchmark-dev
  iproute2 procps python3 python3-yaml  # (yaml: e2e_package_ci_docs reads docs/ci/*.yml)
  clang libclang-rt-14-dev              # libFuzzer for the fuzz targets (scripts/fuzz.sh, tests/fuzz)
  gdb                                   # stacks of a hung or crashed test (tests/common/hang_watchdog.cpp, tests/e2e/with_stacks.sh)
  nftables                              # packet loss on the RoCEv2 test links (no netem in every kernel)
  iptables libnetfilter-queue-dev       # reordering and delay on them (tests/e2e/impair_queue.c, NFQUEUE)
  ethtool                               # captured test links cut UDP GSO sends before the capture sees them
  tshark                                # decodes our CM MADs independently (e2e_ibcm_tshark)
  ucx-utils libfabric-bin gnuplot-nox  # peers the benchmarks compare against, plots; middleware under test
  libucx-dev                            # UCX's memory hooks (libucm) around a registration (e2e_registration_under_memory_hooks)
  openmpi-bin libopenmpi-dev mpich libmpich-dev  # MPI over softverbs (tests/middleware), mpicc for our MPI programs
  netpipe-openmpi netpipe-mpich2        # an MPI program nobody here wrote (NetPIPE), unmodified
  iperf3 qperf sockperf                 # the kernel's TCP and UDP on the RoCE benchmark's link
  qemu-system-x86 busybox-static cpio kmod  # a qemu guest running Linux rxe, the interop peer (e2e_rxe_interop, tests/e2e/rxe_guest.sh)
)
packages=("${build_packages[@]}")
case ${1:-} in
  --build) ;;
  "") packages+=("${test_packages[@]}") ;;
  *) echo "usage: $0 [--build]" >&2; exit 2 ;;
esac
export DEBIAN_FRONTEND=noninteractive
as_root apt-get update -qq
as_root apt-get install -y -qq --no-install-recommends "${packages[@]}"
