# Waiting for a server's TCP port, for the scripts that start a server and
# then its client (the RDMA tools exchange their QP numbers over TCP first:
# a client that comes too early fails "Couldn't connect"). Sourced.
#
# tcp_listens [-n NETNS] PORT: whether something listens on TCP port PORT
# (in network namespace NETNS). ss's own filter, so port 80 is never
# taken for 8080.
tcp_listens() {
  local ns=()
  if [[ $1 == -n ]]; then ns=(-N "$2"); shift 2; fi
  [[ -n $(ss "${ns[@]}" -ltnH "sport = :$1" 2>/dev/null) ]]
}
# wait_until SECONDS PID CHECK...: until CHECK passes (status 0), for at
# most SECONDS, or until process PID (if not empty) is gone (status 1).
wait_until() {
  local seconds=$1 pid=$2 i
  shift 2
  for ((i = 0; i < seconds * 20; i++)); do
    "$@" && return 0
    [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null && return 1
    sleep 0.05
  done
  return 1
}
# wait_tcp_port [-n NETNS] PORT [SECONDS [PID]]: until something listens
# on PORT (status 0), for at most SECONDS (10), or until process PID (the
# server) is gone (status 1: no use waiting for it).
wait_tcp_port() {
  local ns=()
  if [[ $1 == -n ]]; then ns=(-n "$2"); shift 2; fi
  wait_until "${2:-10}" "${3:-}" tcp_listens "${ns[@]}" "$1"
}
# cm_listens PORT [PID]: whether a softverbs rdma_cm listener holds PORT's
# rendezvous name (cm_address.h: "...cm-tcp-ADDRESS:PORT"), in the network
# namespace of process PID if given.
cm_listens() { grep -q -- "-cm-tcp-.*:$1\$" "/proc/${2:-self}/net/unix" 2>/dev/null; }
# wait_cm_port PORT [SECONDS [PID]]: wait_tcp_port for an rdma_cm server
# (rping, perftest -R), which listens on no TCP port, in the namespace of
# the server PID if given. Waiting for a TCP port instead cost each such
# pair the whole timeout.
wait_cm_port() { wait_until "${2:-10}" "${3:-}" cm_listens "$1" "${3:-}"; }
