#!/usr/bin/env bash
# A process killed outright leaves at most its one CM mailbox file, and the
# next CM process of the host removes it. Between hosts, a process's CM ids
# share one mailbox (a file gsi-<netns>-...-gsi-id-<4 hex> in the runtime
# directory, ibcm/gsi_mailbox.h); a process killed by a signal cannot
# remove it, and the next process that binds its own mailbox removes the
# files of this network namespace that nobody is bound to
# (rdmacm/cm_network.cpp). Here a cmtime client in host B is killed with
# SIGKILL while it connects 200 ids to host A (where nobody listens yet),
# and then a second one connects to a server there. The same for a
# listener killed outright.
set -u
a=svkA$$ b=svkB$$ va=svka$$ vb=svkb$$
rt=$(mktemp -d)  # the runtime directory of every process here (0700)
export SOFTVERBS_RUNTIME_DIR=$rt
server= client=
cleanup() { kill -9 $server $client 2>/dev/null; wait 2>/dev/null; ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; rm -rf "$rt"; }
trap cleanup EXIT
command -v cmtime >/dev/null || { echo "cmtime not installed"; exit 77; }
. "$(dirname "$0")/two_hosts.sh"
make_two_hosts 10.98.0 || exit
ns_b=$(ip netns exec "$b" stat -L -c %i /proc/self/ns/net)
id_mailboxes() { find "$rt" -maxdepth 1 -name "gsi-$ns_b-*-gsi-id-*" | wc -l; }  # host B's

# Nobody listens in host A yet: the REQs go unanswered, the ids wait.
ip netns exec "$b" stdbuf -oL cmtime -s 10.98.0.1 -c 200 >"$rt/client.out" 2>&1 &
client=$!
for _ in $(seq 100); do (($(id_mailboxes) > 0)) && break; sleep 0.02; done
sleep 0.3  # connecting (its 200 ids would have 200 mailboxes, were they each to hold one)
kill -9 $client; wait $client 2>/dev/null; client=
left=$(id_mailboxes)
echo "killed (its last words: $(tail -1 "$rt/client.out")): host B's id mailbox files: $left"
ls "$rt" | grep -- "gsi-$ns_b-" | head -5
fail=0
((left == 1)) || { echo "FAIL: a killed process should leave its one mailbox file"; fail=1; }

ip netns exec "$a" cmtime -c 10 >"$rt/server.out" 2>&1 &
server=$!
for _ in $(seq 100); do ls "$rt" | grep -q -- "-gsi-tcp-" && break; sleep 0.05; done
ip netns exec "$b" timeout 60 cmtime -s 10.98.0.1 -c 10 >"$rt/client2.out" 2>&1; rc=$?
after=$(id_mailboxes)
echo "after a second CM process (exit $rc): host B's id mailbox files: $after"
((rc == 0)) || { echo "FAIL: the second cmtime failed"; cat "$rt/client2.out"; fail=1; }
((after == 0)) || { echo "FAIL: the killed process's mailbox file is still there"; ls "$rt"; fail=1; }

# A listener killed outright leaves its service's mailbox file; the next CM
# process of its host removes it too (here a server on another port, once
# a request makes it bind its id mailbox), not only a process that binds
# the same name again.
ns_a=$(ip netns exec "$a" stat -L -c %i /proc/self/ns/net)
listener_files() { find "$rt" -maxdepth 1 -name "gsi-$ns_a-*-gsi-tcp-*:7471" | wc -l; }
kill -9 $server; wait $server 2>/dev/null; server=
killed=$(listener_files)
ip netns exec "$a" cmtime -p 7472 -c 2 >"$rt/server2.out" 2>&1 &
server=$!
for _ in $(seq 100); do ls "$rt" | grep -q -- "-gsi-tcp-.*:7472" && break; sleep 0.05; done
ip netns exec "$b" timeout 60 cmtime -s 10.98.0.1 -p 7472 -c 2 >"$rt/client3.out" 2>&1; rc=$?
echo "listener killed: its mailbox files $killed; after the next CM process (exit $rc): $(listener_files)"
((killed == 1)) || { echo "FAIL: the killed listener should leave its mailbox file"; fail=1; }
((rc == 0 && $(listener_files) == 0)) || { echo "FAIL: the killed listener's mailbox file is still there"; ls "$rt"; fail=1; }
exit $fail
