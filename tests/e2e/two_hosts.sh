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
