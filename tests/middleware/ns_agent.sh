#!/bin/sh
# The "remote shell" MPI launchers use to start their daemons on the other
# hosts (Open MPI's plm_rsh_agent, MPICH's -launcher-exec), for hosts that
# are network namespaces of this machine: runs the command line in the
# namespace that holds the host's address, under softverbs-run.
#   ns_agent.sh [-x] HOST COMMAND...
# SV_HOSTS: "ADDRESS=NAMESPACE ..." (from mpi_job.sh); SOFTVERBS_RUN: the launcher.
[ "$1" = "-x" ] && shift  # hydra in ssh mode: no X11 forwarding wanted
host=$1
shift
for pair in $SV_HOSTS; do
  if [ "${pair%%=*}" = "$host" ]; then
    # The launchers quote words inside their arguments ("orted", hydra's
    # proxy path), as for a remote shell: a shell must read them.
    # Each host has its own hostname (as_host.sh), as real hosts do.
    exec ip netns exec "${pair#*=}" "$(dirname "$0")/as_host.sh" "$host" "$SOFTVERBS_RUN" sh -c "$*"
  fi
done
echo "ns_agent.sh: no namespace for host $host (SV_HOSTS=$SV_HOSTS)" >&2
exit 1
