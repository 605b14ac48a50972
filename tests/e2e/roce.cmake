# The RoCEv2 codec (src/net) against an independent decoder: Wireshark's
# InfiniBand dissector reads back every frame we build, field by field, and
# the ICRC is recomputed with Python's zlib (skipped without tshark).
add_executable(roce_pcap_gen ${CMAKE_CURRENT_LIST_DIR}/roce_pcap_gen.cpp)
target_link_libraries(roce_pcap_gen PRIVATE softverbs_net)
add_test(NAME e2e_roce_tshark COMMAND ${CMAKE_CURRENT_LIST_DIR}/roce_tshark.sh $<TARGET_FILE:roce_pcap_gen>)
set_tests_properties(e2e_roce_tshark PROPERTIES LABELS e2e TIMEOUT 120 SKIP_RETURN_CODE 77)
