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
