# Sourced by the two-host tests: hosts A and B as network namespaces $a and
# $b joined by a veth pair $va/$vb, with addresses PREFIX.1 (A) and
# PREFIX.2 (B) on a /24 and loopback up. The caller names the four and
# deletes the namespaces on exit (its trap, set before the call).
#   make_two_hosts PREFIX    e.g. make_two_hosts 10.94.0
# Returns 77 when namespaces cannot be made (no right to), 1 when the link
# cannot be set up; says which.
make_two_hosts() {
  local prefix=$1
  ip netns add "$a" 2>/dev/null && ip netns add "$b" || { echo "cannot create network namespaces: skipped"; return 77; }
  ip link add "$va" netns "$a" type veth peer name "$vb" netns "$b" &&
    ip -n "$a" addr add "$prefix.1/24" dev "$va" && ip -n "$b" addr add "$prefix.2/24" dev "$vb" &&
    ip -n "$a" link set lo up && ip -n "$b" link set lo up &&
    ip -n "$a" link set "$va" up && ip -n "$b" link set "$vb" up || { echo "cannot set up the veth link"; return 1; }
}

# gid_of HOST GID: the index ibv_devinfo shows for GID (as it prints it,
# e.g. ::ffff:10.94.0.1) in namespace HOST; empty when it has none.
gid_of() {
  ip netns exec "$1" ibv_devinfo -v | sed -nE "s/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]+${2//./\\.},.*/\1/p" | head -1
}

# count_roce_sent HOST: an nftables counter of the RoCEv2 packets (UDP 4791)
# the namespace HOST sends. Returns 77 when nftables refuses it.
count_roce_sent() {
  ip netns exec "$1" nft -f - <<'NFT' || { echo "nft refused the counter"; return 77; }
table inet roce {
  chain out {
    type filter hook output priority 0;
    udp dport 4791 counter
  }
}
NFT
}

# roce_crossed_link HOST: passes when HOST sent RoCEv2 packets since
# count_roce_sent, i.e. the traffic went over the link (not through shared
# memory); says how many.
roce_crossed_link() {
  local packets
  packets=$(ip netns exec "$1" nft list chain inet roce out | grep -o 'packets [0-9]*' | grep -o '[0-9]*')
  echo "RoCEv2 packets host $1 sent on the link: ${packets:-0}"
  ((${packets:-0} > 0)) || { echo "no RoCEv2 packet crossed the link"; return 1; }
}

# make_hosts N PREFIX: N hosts, network namespaces ${host_ns[1..N]} named
# $hosts_tag<i>, each with address PREFIX.<i>/24 on a veth to one bridge in
# namespace $switch_ns (the caller names $hosts_tag and $switch_ns, and
# deletes the N + 1 namespaces on exit: delete_hosts). Returns as
# make_two_hosts does.
make_hosts() {
  local n=$1 prefix=$2 i ns
  host_ns=()
  ip netns add "$switch_ns" 2>/dev/null || { echo "cannot create network namespaces: skipped"; return 77; }
  ip -n "$switch_ns" link add br0 type bridge && ip -n "$switch_ns" link set br0 up &&
    ip -n "$switch_ns" link set lo up || { echo "cannot make the bridge"; return 1; }
  for i in $(seq "$n"); do
    ns=$hosts_tag$i
    host_ns[i]=$ns
    ip netns add "$ns" || return 1
    ip link add "h$i" netns "$ns" type veth peer name "p$i" netns "$switch_ns" &&
      ip -n "$ns" addr add "$prefix.$i/24" dev "h$i" && ip -n "$ns" link set lo up &&
      ip -n "$ns" link set "h$i" up && ip -n "$switch_ns" link set "p$i" master br0 up ||
      { echo "cannot link host $i to the bridge"; return 1; }
  done
}

# delete_hosts: the namespaces make_hosts made.
delete_hosts() {
  local ns
  for ns in "${host_ns[@]}"; do ip netns del "$ns" 2>/dev/null; done
  ip netns del "$switch_ns" 2>/dev/null
}
