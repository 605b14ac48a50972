# The RoCEv2 codec (src/net) against an independent decoder: Wireshark's
# InfiniBand dissector reads back every frame we build, field by field, and
# the ICRC is recomputed with Python's zlib (skipped without tshark).
add_executable(roce_pcap_gen ${CMAKE_CURRENT_LIST_DIR}/roce_pcap_gen.cpp)
target_link_libraries(roce_pcap_gen PRIVATE softverbs_net)
add_test(NAME e2e_roce_tshark COMMAND ${CMAKE_CURRENT_LIST_DIR}/roce_tshark.sh $<TARGET_FILE:roce_pcap_gen>)
set_tests_properties(e2e_roce_tshark PROPERTIES LABELS e2e TIMEOUT 120 SKIP_RETURN_CODE 77)

# RoCEv2 between two hosts made of network namespaces (roce_netns.sh creates
# and deletes them): Debian's tools unmodified, lossless, with random loss,
# and captured for tshark. Root is needed for the namespaces (skip: 77).
function(roce_netns_test name)
  add_test(NAME e2e_roce_${name} COMMAND ${CMAKE_CURRENT_LIST_DIR}/roce_netns.sh ${ARGN})
  set_tests_properties(e2e_roce_${name} PROPERTIES LABELS "e2e;roce" TIMEOUT 120 SKIP_RETURN_CODE 77
                       ENVIRONMENT "LD_LIBRARY_PATH=${PROJECT_BINARY_DIR}/lib;SOFTVERBS_STAT=$<TARGET_FILE:softverbs_stat>")
endfunction()
roce_netns_test(rc_pingpong pingpong ibv_rc_pingpong -n 500 -c)
roce_netns_test(rc_pingpong_64k pingpong ibv_rc_pingpong -n 100 -s 65536 -c)
roce_netns_test(rc_pingpong_events pingpong ibv_rc_pingpong -n 300 -e -c)
roce_netns_test(uc_pingpong pingpong ibv_uc_pingpong -n 500 -c)
roce_netns_test(ud_pingpong pingpong ibv_ud_pingpong -n 500 -c)
roce_netns_test(srq_pingpong pingpong ibv_srq_pingpong -n 300 -q 4 -c)
foreach(tool send_lat write_lat read_lat atomic_lat send_bw write_bw read_bw atomic_bw)
  roce_netns_test(ib_${tool} perftest ib_${tool} -n 200)
endforeach()
roce_netns_test(rc_pingpong_drop3 --drop-data 3 pingpong ibv_rc_pingpong -n 200 -s 10000 -c)
roce_netns_test(ib_write_bw_drop3 --drop 3 perftest ib_write_bw -n 50)
roce_netns_test(ib_read_bw_drop3 --drop 3 perftest ib_read_bw -n 50)
roce_netns_test(ib_send_bw_drop3 --drop 3 perftest ib_send_bw -n 50)
roce_netns_test(ib_atomic_lat_drop3 --drop 3 perftest ib_atomic_lat -n 200)
roce_netns_test(rc_pingpong_netem --netem "loss 3% duplicate 1% reorder 25% delay 1ms" pingpong ibv_rc_pingpong -n 200 -c)
roce_netns_test(rc_pingpong_pcap --pcap pingpong ibv_rc_pingpong -n 100 -c)
roce_netns_test(ud_pingpong_pcap --pcap pingpong ibv_ud_pingpong -n 100 -c)
roce_netns_test(ib_read_lat_pcap --pcap perftest ib_read_lat -n 50)
roce_netns_test(ib_atomic_lat_pcap --pcap perftest ib_atomic_lat -n 50)
roce_netns_test(rc_pingpong_ipv6_pcap --ipv6 --pcap pingpong ibv_rc_pingpong -n 100 -c)
roce_netns_test(ud_pingpong_ipv6 --ipv6 pingpong ibv_ud_pingpong -n 100 -c)
roce_netns_test(rc_pingpong_stats --stats --drop-data 3 pingpong ibv_rc_pingpong -n 2000 -s 10000 -c)
# Several processes per host share UDP 4791 (transport/roce_forward.h).
roce_netns_test(rc_pingpong_3pairs --pairs 3 pingpong ibv_rc_pingpong -n 200 -c)
roce_netns_test(ud_pingpong_2pairs --pairs 2 pingpong ibv_ud_pingpong -n 200 -c)
roce_netns_test(ib_write_bw_2pairs --pairs 2 perftest ib_write_bw -n 100)
# SOFTVERBS_PCAP: each process writes what it sent and received (transport/roce_capture.h).
roce_netns_test(rc_pingpong_self_pcap --self-pcap pingpong ibv_rc_pingpong -n 100 -c)
roce_netns_test(ib_read_lat_self_pcap --self-pcap perftest ib_read_lat -n 50)
# Interop with the Linux soft-RoCE driver (rxe) in a qemu guest (TCG; the
# guest is built once by rxe_guest.sh from Debian's kernel package and cached
# under ~/.cache/softverbs-rxe): Debian's pingpong tools, softverbs on this
# host through our libibverbs, rxe in the guest through Debian's libibverbs,
# inside a network namespace the test creates (bridge + tap). Both ends as
# server and as client; the link is captured and every ICRC recomputed.
# Skipped (77) only without network namespaces, qemu or a tap device, or when
# the guest cannot be built here (no busybox-static or Debian archive).
function(rxe_interop_test name)
  add_test(NAME e2e_rxe_${name} COMMAND ${CMAKE_CURRENT_LIST_DIR}/rxe_interop.sh ${ARGN})
  set_tests_properties(e2e_rxe_${name} PROPERTIES LABELS "e2e;roce;interop" TIMEOUT 300 SKIP_RETURN_CODE 77
                       RESOURCE_LOCK rxe_guest_cpu
                       ENVIRONMENT "LD_LIBRARY_PATH=${PROJECT_BINARY_DIR}/lib")
endfunction()
rxe_interop_test(rc_softverbs_server rc softverbs-server -n 100 -c)
rxe_interop_test(rc_softverbs_client rc softverbs-client -n 100 -c)
# rxe's port MTU on a 1500-byte link is 1024, and ibv_ud_pingpong refuses a larger size.
rxe_interop_test(ud_softverbs_server ud softverbs-server -n 100 -s 1024 -c)
rxe_interop_test(ud_softverbs_client ud softverbs-client -n 100 -s 1024 -c)
# 64 KiB messages: 64 packets each way per iteration (segmentation, AckReq every 16, coalesced ACKs).
rxe_interop_test(rc_64k_softverbs_client rc softverbs-client -n 50 -s 65536 -c)
