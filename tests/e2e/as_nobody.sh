# Sourced by the tests that play another local user: user nobody, who owns
# nothing of ours. Needs root (to become nobody); returns 77 (skip) when we
# are not root or there is no user nobody.
#   need_nobody || exit
#   "${as_nobody[@]}" CMD ARGS...      (also after `ip netns exec NS`)
as_nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
need_nobody() {
  ((EUID == 0)) || { echo "needs root to act as another user"; return 77; }
  id nobody >/dev/null 2>&1 || { echo "no user nobody"; return 77; }
}
