#!/usr/bin/python3
"""An MPI ping-pong's tail between two hosts: softverbs against Open MPI's TCP, same run.

bench/mpi/pingpong_tail.c times every iteration of a ping-pong between one
rank on each host (the network namespaces of bench/mpi_hosts.py, launched
as it launches its jobs) and prints the average, p50, p90, p99, the share
of messages over 15 us and of the time they took, and the median of each
2000 iterations in turn. Configurations alternate, ROUNDS of each:

    bench/mpi_hosts_tail.py [--rounds N] [--iterations N] [--size B] [--warmup N]
                            [--configs "softverbs,btl tcp"] [--build DIR] [--env K=V ...]

--env sets variables for the softverbs runs (SOFTVERBS_NET_NAP_US=..., say).
Needs root (namespaces). Prints to stdout; writes nothing.
"""

import argparse
import os
import subprocess

import mpi_hosts

ROOT = mpi_hosts.ROOT


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=100000)
    ap.add_argument("--size", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--configs", default="softverbs,btl tcp")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--env", action="append", default=[])
    args = ap.parse_args()
    args.build, args.quick = os.path.abspath(args.build), False
    program = os.path.join(args.build, "bin", "mpi_pingpong_tail")
    src = os.path.join(ROOT, "bench", "mpi", "pingpong_tail.c")
    if not os.path.exists(program) or os.path.getmtime(program) < os.path.getmtime(src):
        subprocess.run(["mpicc.openmpi", "-O2", "-o", program, src], check=True)
    hosts = mpi_hosts.TwoHosts(1500)
    try:
        for r in range(args.rounds):
            for config in args.configs.split(","):
                cmd, env = mpi_hosts.command(config, 2, program, args, hosts)
                at = cmd.index(program)
                if mpi_hosts.CONFIGS[config][3]:  # (under softverbs: --env's variables, to every rank)
                    for kv in args.env:
                        cmd[at:at] = ["-x", kv]
                        at += 2
                        env[kv.split("=", 1)[0]] = kv.split("=", 1)[1]
                out = subprocess.run(cmd + [str(args.iterations), str(args.size), str(args.warmup)], env=env,
                                     capture_output=True, text=True, timeout=600)
                lines = [l for l in out.stdout.splitlines() if l.startswith(("avg", "chunks"))]
                print(f"round {r + 1} {config}: " + " | ".join(reversed(lines)), flush=True)
    finally:
        hosts.close()


if __name__ == "__main__":
    main()
