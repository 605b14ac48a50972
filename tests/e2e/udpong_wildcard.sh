#!/usr/bin/env bash
# A udpong server bound to a wildcard (0.0.0.0, or :: dual stack) answers
# on every address of the host: clients aim at 127.0.0.1 and at the host's
# own global address (when it has one), and the server must count every
# datagram they sent, in order. Data (1000 bytes: by UDP, larger than one
# UD message with our header) and the END that follows (by UD) used to
# arrive out of order: the server answered END having counted 2 of 10.
# (Without -b, udpong binds getaddrinfo(NULL)'s first address, ::1, as
# plain UDP would: IPv4 clients are refused there, by the kernel too.)
# usage: udpong_wildcard.sh PORT WILDCARD
set -u
port=$1 wild=$2
targets=(127.0.0.1)
host=$(ip -4 -o addr show scope global 2>/dev/null | awk '{sub("/.*", "", $4); print $4; exit}')
[ -n "$host" ] && targets+=("$host")
udpong -b "$wild" -p "$port" >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT
for _ in $(seq 100); do ss -uln | grep -q ":$port " && break; sleep 0.05; done
rc=0
for t in "${targets[@]}"; do
  out=$(timeout 30 udpong -s "$t" -p "$port" -S 1000 -C 100 2>&1)
  line=$(grep -E '^custom' <<<"$out")
  echo "server on $wild, client to $t: ${line:-$out}"
  if ! grep -Eq '^custom +1000 +100 ' <<<"$line"; then
    echo "FAIL: the server did not count the 100 datagrams sent to $t"
    rc=1
  fi
done
kill -0 $server 2>/dev/null || { echo "FAIL: the server died"; rc=1; }
exit $rc
