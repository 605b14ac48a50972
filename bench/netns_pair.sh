# Two network namespaces joined by a veth pair: the "two hosts" of the
# benchmarks that run RoCEv2 (roce_netns.sh, hostd_ab.sh, build_ab.sh).
# Sourced; needs root.
#   netns_pair SUBNET [MTU]
# SUBNET is the first three octets ("10.95.0"): host A is SUBNET.1, B is
# SUBNET.2. Sets a, b (the namespaces), ip_a, ip_b, and ga, gb (the GID
# index of each address, for perftest's -x; run after LD_LIBRARY_PATH names
# our libraries). Both namespaces go at exit; a script that needs more done
# then sets netns_pair_at_exit to a command, run first. Also `median`, for
# the rounds of the scripts that source it.
netns_pair_at_exit=:
netns_pair() {
  local subnet=$1 mtu=${2:-1500} tag=$$
  a=np${tag}A b=np${tag}B
  local va=np${tag}a vb=np${tag}b
  ip_a=$subnet.1 ip_b=$subnet.2
  trap 'eval "$netns_pair_at_exit"; ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null' EXIT
  ip netns add "$a" && ip netns add "$b" || exit 1
  ip link add "$va" type veth peer name "$vb"
  ip link set "$va" netns "$a"; ip link set "$vb" netns "$b"
  ip -n "$a" addr add "$ip_a/24" dev "$va"; ip -n "$b" addr add "$ip_b/24" dev "$vb"
  local ns
  for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
  ip -n "$a" link set "$va" mtu "$mtu" up; ip -n "$b" link set "$vb" mtu "$mtu" up
  ga=$(netns_gid_of "$a" "$ip_a") gb=$(netns_gid_of "$b" "$ip_b")
}
# The GID index of IPv4 address $2 in namespace $1.
netns_gid_of() {
  ip netns exec "$1" ibv_devinfo -v | sed -nE "s/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]+::ffff:${2//./\\.},.*/\1/p" | head -1
}
# The median of the numbers on stdin, one per line.
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
# Drops PERCENT % of each namespace's UDP 4791 packets at random (an
# nftables rule on output; a GSO send is dropped whole), or stops that.
#   netns_loss on PERCENT | netns_loss off
netns_loss() {
  local ns
  for ns in "$a" "$b"; do
    if [ "$1" = on ]; then
      ip netns exec "$ns" nft -f - <<NFT
table inet loss {
  chain out {
    type filter hook output priority 0;
    udp dport 4791 numgen random mod 100 < $2 drop
  }
}
NFT
    else
      ip netns exec "$ns" nft delete table inet loss
    fi
  done
}
