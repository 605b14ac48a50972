# A Debian package of the runtime: `cpack --config build/CPackConfig.cmake`
# (README, "Installing"). The libraries go to their private directory,
# <libdir>/softverbs (never over Debian's libibverbs1: a program gets ours
# only through softverbs-run or LD_LIBRARY_PATH), softverbs-run and
# softverbs-stat to bin, softverbs-hostd to sbin with its systemd unit, and
# the man pages (packaging/). dpkg-shlibdeps writes the Depends from what
# the binaries link (our own libibverbs.so.1 resolved inside the package).
# Tested by e2e_package (tests/package).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME softverbs)
set(CPACK_PACKAGE_VENDOR softverbs)
set(CPACK_PACKAGE_CONTACT "softverbs developers <softverbs@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "RDMA verbs without RDMA hardware (user-space libibverbs and librdmacm)")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
  "softverbs is a user-space RDMA device: drop-in libibverbs.so.1 and librdmacm.so.1\n\
that unmodified RDMA programs (ibverbs-utils, perftest, rdmacm-utils, UCX,\n\
libfabric, Open MPI, MPICH) run on, with no NIC, no kernel module and no root.\n\
Processes of one host talk through shared memory, hosts through RoCEv2\n\
(UDP 4791, wire-compatible with rxe and RoCE NICs). Run a program with\n\
`softverbs-run PROGRAM`; `softverbs-hostd` lets the users of one host reach\n\
each other.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR}/lib)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS OFF)  # private libraries: no shlibs for others to depend on
set(CPACK_STRIP_FILES ON)
include(CPack)
