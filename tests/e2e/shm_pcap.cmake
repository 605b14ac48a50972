# SOFTVERBS_PCAP on the intra-host path (transport/shm_capture.h): two
# processes of this host, both writing captures; tshark must decode every
# frame as RoCE with the expected opcodes, nothing malformed, every ICRC
# right (recomputed by roce_pcap_check.py), PSNs without gaps, each message
# in one file only. Skipped (77) without tshark. One CPU for the pingpongs:
# 20 iterations; the time is tshark's and the checker's (0.99 CPUs
# measured). The perftest cases take both (below).
set(SHM_PCAP ${CMAKE_CURRENT_LIST_DIR}/shm_pcap.sh)
# name | opcodes that must appear | port | pingpong/perftest | tool and arguments
set(SHM_PCAP_CASES
  "rc_pingpong|RC_SEND_FIRST,RC_SEND_MIDDLE,RC_SEND_LAST,RC_ACKNOWLEDGE|pingpong|ibv_rc_pingpong -n 20 -c"
  "rc_pingpong_small|RC_SEND_ONLY,RC_ACKNOWLEDGE|pingpong|ibv_rc_pingpong -n 20 -s 100 -m 256 -c"
  "uc_pingpong|UC_SEND_FIRST,UC_SEND_LAST|pingpong|ibv_uc_pingpong -n 20 -c"
  "ud_pingpong|UD_SEND_ONLY|pingpong|ibv_ud_pingpong -n 20 -c"
  "ib_write_bw|RC_RDMA_WRITE_FIRST,RC_RDMA_WRITE_MIDDLE,RC_RDMA_WRITE_LAST,RC_ACKNOWLEDGE|perftest|ib_write_bw -n 20"
  "ib_read_lat|RC_RDMA_READ_REQUEST,RC_RDMA_READ_RESPONSE_ONLY|perftest|ib_read_lat -n 20"
  "ib_read_bw|RC_RDMA_READ_REQUEST,RC_RDMA_READ_RESPONSE_FIRST,RC_RDMA_READ_RESPONSE_MIDDLE,RC_RDMA_READ_RESPONSE_LAST|perftest|ib_read_bw -n 20"
  "ib_atomic_lat|RC_FETCH_ADD,RC_ATOMIC_ACKNOWLEDGE|perftest|ib_atomic_lat -n 20"
  "ib_atomic_lat_cmp_swap|RC_COMPARE_SWAP,RC_ATOMIC_ACKNOWLEDGE|perftest|ib_atomic_lat -A CMP_AND_SWAP -n 20"
  "ib_send_lat_xrc|XRC_SEND_ONLY,RC_ACKNOWLEDGE|perftest|ib_send_lat -c XRC -n 20")
set(port 19400)  # 19400-19449
foreach(case ${SHM_PCAP_CASES})
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 name)
  list(GET parts 1 expect)
  list(GET parts 2 kind)
  list(GET parts 3 cmd)
  separate_arguments(cmd UNIX_COMMAND "${cmd}")
  add_test(NAME e2e_shm_pcap_${name} COMMAND ${SHM_PCAP} ${expect} ${port} ${kind} ${cmd})
  set_tests_properties(e2e_shm_pcap_${name} PROPERTIES ENVIRONMENT "LD_LIBRARY_PATH=${PROJECT_BINARY_DIR}/lib"
                       LABELS "e2e;pcap" TIMEOUT 180 SKIP_RETURN_CODE 77)
  # perftest times its report with a clock it calibrates by sampling, and
  # beside another test's pollers the fit fails and no report is printed
  # ("Correlation coefficient r^2: 0.894 < 0.9", e2e_shm_pcap_ib_atomic_lat_cmp_swap
  # in CI's README stage): its cases run alone, as roce.cmake's do.
  if(kind STREQUAL "perftest")
    set_tests_properties(e2e_shm_pcap_${name} PROPERTIES PROCESSORS 2)
  endif()
  math(EXPR port "${port} + 1")
endforeach()
