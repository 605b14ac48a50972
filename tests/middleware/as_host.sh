#!/bin/sh
# as_host.sh NAME COMMAND...: runs COMMAND with hostname NAME, in a UTS
# namespace of its own. Network namespaces share the machine's hostname;
# MPI libraries take ranks with one hostname for ranks of one node (shared
# memory segments, node leaders), so each test host needs its own.
name=$1
shift
exec unshare --uts sh -c 'hostname "$0" && exec "$@"' "$name" "$@"
