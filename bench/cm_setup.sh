#!/usr/bin/env bash
# Connection set-up through our librdmacm (Debian's cmtime, unmodified)
# against TCP connection set-up over loopback (bench/micro/tcp_connect_time),
# in the same run, alternating, ROUNDS times.
#   bench/cm_setup.sh [BUILD_DIR] [CONNECTIONS] [ROUNDS]
set -eu
build=${1:-build}
n=${2:-200}
rounds=${3:-3}
export LD_LIBRARY_PATH=$(cd "$build/lib" && pwd)
port=19950
for r in $(seq "$rounds"); do
  cmtime -p $port -c "$n" >/dev/null 2>&1 &
  server=$!
  for _ in $(seq 100); do ss -xl | grep -q ":$port " && break; sleep 0.05; done
  cm=$(cmtime -s 127.0.0.1 -p $port -c "$n" | awk '/^connect +:/ {print $3, $NF}')
  kill $server; wait $server 2>/dev/null || true
  "$build/bin/tcp_connect_time" server $((port + 1)) "$n" &
  server=$!
  sleep 0.2
  tcp=$("$build/bin/tcp_connect_time" client 127.0.0.1 $((port + 1)) "$n" | awk '{print $3, $(NF-3)}')
  wait $server
  set -- $cm; cm_total=$1 cm_per=$2
  set -- $tcp; tcp_total=$1 tcp_per=$2
  echo "round $r: $n connections: rdma_cm (cmtime) ${cm_total} ms (${cm_per} us/conn), TCP ${tcp_total} ms (${tcp_per} us/conn), ratio $(awk "BEGIN {printf \"%.2f\", $cm_per / $tcp_per}")"
done
