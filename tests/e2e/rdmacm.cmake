# librdmacm end to end: Debian's rdmacm-utils and perftest -R, unmodified,
# server and client in two processes over our librdmacm.so.1.
# name | ready (run_cm_pair.sh) | server command | client command | client output must match
set(CM_PAIR ${CMAKE_CURRENT_SOURCE_DIR}/run_cm_pair.sh)
set(CM_CASES
  "rping|listen:19801|rping -s -a 127.0.0.1 -p 19801 -C 10 -v|rping -c -a 127.0.0.1 -p 19801 -C 10 -v|rdma-ping-9:"
  "rping_verify_4k|listen:19802|rping -s -a 127.0.0.1 -p 19802 -C 200 -V -S 4096|rping -c -a 127.0.0.1 -p 19802 -C 200 -V -S 4096|"
  "rping_verify_64k|listen:19803|rping -s -a 127.0.0.1 -p 19803 -C 20 -V -S 65535|rping -c -a 127.0.0.1 -p 19803 -C 20 -V -S 65535|"
  "rping_verify_small|listen:19804|rping -s -a 127.0.0.1 -p 19804 -C 100 -V -S 23|rping -c -a 127.0.0.1 -p 19804 -C 100 -V -S 23|"
  "rping_self_qp|listen:19805|rping -s -a 127.0.0.1 -p 19805 -C 20 -V -q|rping -c -a 127.0.0.1 -p 19805 -C 20 -V -q|"
  "ucmatose_4|listen:19806|ucmatose -p 19806 -c 4|ucmatose -s 127.0.0.1 -p 19806 -c 4|test complete"
  "cmtime_50|listen:19807|cmtime -p 19807 -c 50|cmtime -s 127.0.0.1 -p 19807 -c 50|connect"
  "rdma_server_client|listen:19808|rdma_server -p 19808|rdma_client -s 127.0.0.1 -p 19808|rdma_client: end 0"
  "rdma_xserver_xclient|listen:19809|rdma_xserver -p 19809 -c r|rdma_xclient -s 127.0.0.1 -p 19809 -c r|rdma_xclient: end 0"
  "rdma_xserver_xclient_xrc|listen:19813|rdma_xserver -p 19813 -c x|rdma_xclient -s 127.0.0.1 -p 19813 -c x|rdma_xclient: end 0"
  # mckey binds to 127.0.0.1: from another address the group would be
  # joined (IGMP) and sent to on that address's link, off this machine.
  # The sender starts once the members joined (their receives are posted
  # before the join): both sides then sleep mckey's 3 s after joining at
  # once, not one after the other.
  "mckey|output:joined dgid|mckey -m 224.0.0.81 -b 127.0.0.1 -C 10|mckey -m 224.0.0.81 -b 127.0.0.1 -s -C 10|data transfers complete"
  "mckey_no_loopback|output:joined dgid|mckey -m 224.0.0.83 -b 127.0.0.1 -C 10|mckey -m 224.0.0.83 -b 127.0.0.1 -s -l -C 10|data transfers complete"
  "mckey_two_members|output:joined dgid|mckey -m 224.0.0.84 -b 127.0.0.1 -c 2 -C 10|mckey -m 224.0.0.84 -b 127.0.0.1 -s -C 10|data transfers complete"
  "mckey_send_only|output:joined dgid|mckey -m 224.0.0.82 -b 127.0.0.1 -C 10|mckey -m 224.0.0.82 -b 127.0.0.1 -s -o -C 10|data transfers complete"
  "perftest_ib_send_lat_R|listen:19810|ib_send_lat -R -d softverbs0 -p 19810|ib_send_lat -R -d softverbs0 -p 19810 127.0.0.1|^ *2 +1000"
  "perftest_ib_write_bw_R|listen:19811|ib_write_bw -R -d softverbs0 -p 19811|ib_write_bw -R -d softverbs0 -p 19811 127.0.0.1|^ *65536 +5000"
  "perftest_ib_read_lat_R|listen:19812|ib_read_lat -R -d softverbs0 -p 19812|ib_read_lat -R -d softverbs0 -p 19812 127.0.0.1|^ *2 +1000"
  # Several tests in one run, as users run qperf: its server binds, sends
  # the port over TCP, then listens; the REQ may come first (issue 19).
  "qperf_cm_tests|tcp:19814|qperf -lp 19814|qperf -lp 19814 -cm1 -t 1 127.0.0.1 rc_lat rc_bw rc_rdma_read_lat rc_rdma_write_bw|rc_rdma_write_bw")
foreach(case ${CM_CASES})
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 name)
  list(GET parts 1 ready)
  list(GET parts 2 server)
  list(GET parts 3 client)
  list(GET parts 4 expect)
  separate_arguments(server UNIX_COMMAND "${server}")
  separate_arguments(client UNIX_COMMAND "${client}")
  add_test(NAME e2e_cm_${name} COMMAND ${CM_PAIR} ${ready} ${server} -- ${client})
  # SOFTVERBS_LOG=info: a failure shows why a verb was refused (quiet otherwise).
  set_tests_properties(e2e_cm_${name} PROPERTIES
    ENVIRONMENT "${E2E_ENV};SOFTVERBS_LOG=info;EXPECT_CLIENT=${expect}" LABELS "e2e;rdmacm" TIMEOUT 90)
  if(name MATCHES "^(cmtime|qperf)")
    set_tests_properties(e2e_cm_${name} PROPERTIES ENVIRONMENT "${E2E_ENV};EXPECT_CLIENT=${expect};SERVER_RUNS_FOREVER=1")
  endif()
  if(name MATCHES "^(perftest|qperf)")
    # perftest polls on both sides: a CPU each. (mckey's receiver polls
    # while its sender sleeps between sends: 0.6 CPUs measured, one slot.)
    set_tests_properties(e2e_cm_${name} PROPERTIES PROCESSORS 2)
  endif()
endforeach()

# 10000 connections through one event channel, each side held to the
# default 1024 open files (issue 39): an id costs no descriptor of its own.
# cmtime prints failed connections' events and exits 0 all the same.
add_test(NAME e2e_cm_cmtime_10000_at_1024_fds COMMAND ${CM_PAIR} listen:19815
  prlimit --nofile=1024 cmtime -p 19815 -c 10000 --
  prlimit --nofile=1024 cmtime -s 127.0.0.1 -p 19815 -c 10000)
set_tests_properties(e2e_cm_cmtime_10000_at_1024_fds PROPERTIES
  ENVIRONMENT "${E2E_ENV};SERVER_RUNS_FOREVER=1;EXPECT_CLIENT=^connect +:;UNEXPECTED=event: |[Ee]rror|Too many open files|failed"
  LABELS "e2e;rdmacm" TIMEOUT 90)

# A same-host server held to 40 open files holds 64 client processes'
# connections at once (a descriptor only for each request not answered
# yet); out of descriptors, it says so once and does not spin.
add_test(NAME e2e_cm_server_out_of_files COMMAND ${CMAKE_CURRENT_LIST_DIR}/cm_server_out_of_files.sh 19816 64)
set_tests_properties(e2e_cm_server_out_of_files PROPERTIES ENVIRONMENT "${E2E_ENV}" LABELS "e2e;rdmacm" TIMEOUT 60)

# udaddy has no port option: it always uses 7174.
add_test(NAME e2e_cm_udaddy COMMAND ${CM_PAIR} listen:7174 udaddy -- udaddy -s 127.0.0.1)
set_tests_properties(e2e_cm_udaddy PROPERTIES ENVIRONMENT "${E2E_ENV};EXPECT_CLIENT=test complete"
  LABELS "e2e;rdmacm" TIMEOUT 90 RESOURCE_LOCK cm_port_7174)
