#!/usr/bin/python3
"""MPI jobs between two hosts, over softverbs and over the kernel's TCP beneath it, in one run.

bench/mpi/hosts_suite.c is one job with the figures of an MPI application:
point-to-point latency and bandwidth (8 B to 4 MiB) between ranks on the
two hosts, allreduce, alltoall and bcast (8 B to 1 MiB), two kernels
(a distributed matrix multiply, compute-bound; an all-to-all transpose, as an
FFT's, communication-bound), the wall time of the whole and the ranks' CPU
seconds (user + system, every thread). It runs with 2 ranks (one per host)
and 4 (two per host) under each configuration, rounds interleaved so that
every configuration of a round sees the same machine:

  softverbs        Open MPI 4.1, pml ucx, UCX_TLS=rc_verbs,ud_verbs,self (softverbs-run)
  btl tcp          Open MPI, pml ob1, btl tcp,self (Open MPI's own TCP)
  UCX tcp          Open MPI, pml ucx, UCX_TLS=tcp,self (UCX's TCP transport)
  MPICH softverbs  MPICH 4.0 (ch4:ucx), UCX_TLS=rc_verbs,ud_verbs,self (softverbs-run)
  MPICH UCX tcp    MPICH, UCX_TLS=tcp,self
  softverbs 4X EDR as softverbs, the port at 4X EDR whatever its link
                   (bench/profiles/4x_edr.profile), only when --configs names it
  softverbs spin   as softverbs, pollers never yield (SOFTVERBS_POLL_YIELD_US=0),
                   only when --configs names it

The two hosts are network namespaces on a veth pair (MTU 1500, or --mtu),
each end named mpi0 in its namespace (UCX's tcp transport is told the
device by name). No configuration uses shared memory: ranks of one host
talk over the same transport as the others. Ranks are not bound to cores.
Needs root (namespaces). Writes bench/results/mpi_hosts_latest.md,
mpi_hosts_results.json and mpi_hosts_speed.png; --update-readme puts the
tables in the README.

    bench/mpi_hosts.py [--rounds N] [--quick] [--ranks 2,4] [--configs A,B] [--build DIR] [--update-readme]
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import tempfile
import time

import plot_style
from report import fmt, median, update_readme

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AGENT = os.path.join(ROOT, "tests", "middleware", "ns_agent.sh")
AS_HOST = os.path.join(ROOT, "tests", "middleware", "as_host.sh")
BEGIN, END = "<!-- mpi-hosts-bench:begin (bench/mpi_hosts.py --update-readme) -->", "<!-- mpi-hosts-bench:end -->"
NET = "10.98.0"
SV = ["UCX_TLS=rc_verbs,ud_verbs,self", "UCX_NET_DEVICES=softverbs0:1"]
UCX_TCP = ["UCX_TLS=tcp,self", "UCX_NET_DEVICES=mpi0"]
OMPI_UCX = ["--mca", "pml", "ucx", "--mca", "pml_ucx_devices", "any", "--mca", "osc", "ucx", "--mca", "btl", "self"]

# name -> (MPI, launcher arguments, UCX environment, under softverbs-run)
CONFIGS = {
    "softverbs": ("openmpi", OMPI_UCX, SV, True),
    "btl tcp": ("openmpi", ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
                            "--mca", "btl_tcp_if_include", f"{NET}.0/24"], [], False),
    "UCX tcp": ("openmpi", OMPI_UCX + ["--mca", "pml_ucx_tls", "any"], UCX_TCP, False),
    "MPICH softverbs": ("mpich", [], SV, True),
    "MPICH UCX tcp": ("mpich", [], UCX_TCP, False),
    # (The port's rate decides UCX's protocols: docs/profiles.md, "The port's rate".)
    "softverbs 4X EDR": ("openmpi", OMPI_UCX, SV + [f"SOFTVERBS_PROFILE={ROOT}/bench/profiles/4x_edr.profile"], True),
    # (Pollers that wait long give their core away: src/core/idle_poll.h.)
    "softverbs spin": ("openmpi", OMPI_UCX, SV + ["SOFTVERBS_POLL_YIELD_US=0"], True),
}
# Run only when --configs names them.
OPT_IN = {"softverbs 4X EDR", "softverbs spin"}
# Each table's columns: ours against whom.
PAIRS = [("softverbs", "btl tcp"), ("softverbs", "UCX tcp"), ("MPICH softverbs", "MPICH UCX tcp"),
         ("softverbs", "softverbs 4X EDR"), ("softverbs", "softverbs spin")]
# Figures where more is better (the rest are times).
HIGHER_IS_BETTER = {"bw"}


class TwoHosts:
    """Network namespaces A (NET.1) and B (NET.2) on a veth pair, each end named mpi0."""

    def __init__(self, mtu):
        pid = os.getpid()
        self.a, self.b = f"mhA{pid}", f"mhB{pid}"
        va, vb = f"mha{pid}", f"mhb{pid}"
        cmds = [["ip", "netns", "add", self.a], ["ip", "netns", "add", self.b],
                ["ip", "link", "add", va, "netns", self.a, "type", "veth", "peer", "name", vb, "netns", self.b]]
        for ns, dev, addr in ((self.a, va, 1), (self.b, vb, 2)):
            cmds += [["ip", "-n", ns, "link", "set", dev, "name", "mpi0"],
                     ["ip", "-n", ns, "link", "set", "mpi0", "mtu", str(mtu)],
                     ["ip", "-n", ns, "addr", "add", f"{NET}.{addr}/24", "dev", "mpi0"],
                     ["ip", "-n", ns, "link", "set", "lo", "up"], ["ip", "-n", ns, "link", "set", "mpi0", "up"]]
        for cmd in cmds:
            subprocess.run(cmd, check=True)

    def close(self):
        for ns in (self.a, self.b):
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)


def command(config, ranks, program, args, hosts):
    """The job's command line and environment, as a user would start it in host A."""
    mpi, mpi_args, ucx_env, under_softverbs = CONFIGS[config]
    run_tool = os.path.join(args.build, "bin", "softverbs-run")
    placement = f"{NET}.1:{ranks // 2},{NET}.2:{ranks - ranks // 2}"
    env = dict(os.environ, SV_HOSTS=f"{NET}.1={hosts.a} {NET}.2={hosts.b}",
               SOFTVERBS_RUN=run_tool if under_softverbs else "env")
    prog = [program] + (["--quick"] if args.quick else [])
    if mpi == "openmpi":
        cmd = ["mpirun.openmpi", "-np", str(ranks), "--bind-to", "none", "--mca", "btl_base_warn_component_unused", "0",
               "-H", placement, "--mca", "plm_rsh_agent", AGENT, "--mca", "plm_rsh_no_tree_spawn", "1",
               "--mca", "oob_tcp_if_include", f"{NET}.0/24"]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        for v in ucx_env:
            cmd += ["-x", v]
        cmd += mpi_args + prog
    else:
        env.update(v.split("=", 1) for v in ucx_env)
        cmd = ["mpiexec.mpich", "-n", str(ranks), "-launcher", "rsh", "-launcher-exec", AGENT, "-hosts", placement,
               "-localhost", f"{NET}.1"] + prog
    if under_softverbs:
        cmd = [run_tool] + cmd
    return ["ip", "netns", "exec", hosts.a, AS_HOST, f"{NET}.1"] + cmd, env


# A job whose figures are all out but that has not ended this long after:
# hung in MPI_Finalize (MPICH over UCX's tcp transport with 4 ranks does, on
# its own, without softverbs). It is stopped and its figures kept; the report
# says so.
FINALIZE_GRACE_S = 30
hung_in_finalize = set()


def run(config, ranks, programs, args, hosts):
    """One job; {(figure, size): value}."""
    cmd, env = command(config, ranks, programs[CONFIGS[config][0]], args, hosts)
    err = tempfile.TemporaryFile(mode="w+")  # (a pipe nobody reads while the job runs could fill)
    job = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True)
    values, lines = {}, []
    deadline = time.monotonic() + 900
    for line in job.stdout:
        lines.append(line)
        parts = line.split()
        if len(parts) == 3 and parts[0] in FIGURE_NAMES:
            values[(parts[0], int(parts[1]))] = float(parts[2])
        elif "wrong" in line or "not a number" in line:
            stop(job)
            raise SystemExit(f"{config}, {ranks} ranks: {line}")
        if parts and parts[0] == "cpu" or time.monotonic() > deadline:
            break
    try:
        rc = job.wait(timeout=FINALIZE_GRACE_S if ("cpu", 0) in values else max(1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        stop(job)
        if ("cpu", 0) not in values:
            raise SystemExit(f"{config}, {ranks} ranks: no end after 900 s\n{''.join(lines)}")
        hung_in_finalize.add((config, ranks))
        return values
    if rc != 0:
        raise SystemExit(f"{config}, {ranks} ranks: exit {rc}\n{' '.join(cmd)}\n{''.join(lines)}\n{err.seek(0) or err.read()}")
    return values


def stop(job):
    """The launcher and every rank it started (in both namespaces: one session)."""
    try:
        os.killpg(job.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    job.wait()
    for mpi in ("openmpi", "mpich"):
        subprocess.run(["pkill", "-KILL", "-f", f"mpi_hosts_suite_{mpi}"], stderr=subprocess.DEVNULL)


FIGURES = [("lat", "latency, us (one way)"), ("bw", "bandwidth, MB/s"), ("allreduce", "allreduce, us"),
           ("alltoall", "alltoall, us"), ("bcast", "bcast, us"), ("matmul", "matrix multiply (compute-bound), s"),
           ("transpose", "all-to-all transpose (communication-bound), s"), ("wall", "the whole job, s"),
           ("cpu", "CPU seconds of all ranks")]
FIGURE_NAMES = {f for f, _ in FIGURES}


def build_programs(args):
    programs = {}
    src = os.path.join(ROOT, "bench", "mpi", "hosts_suite.c")
    for mpi, cc in (("openmpi", "mpicc.openmpi"), ("mpich", "mpicc.mpich")):
        program = os.path.join(args.build, "bin", f"mpi_hosts_suite_{mpi}")
        if not os.path.exists(program) or os.path.getmtime(program) < os.path.getmtime(src):
            subprocess.run([cc, "-O2", "-Wno-stringop-overflow", "-o", program, src], check=True)
        programs[mpi] = program
    return programs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="fewer iterations, smaller kernels")
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--configs", default=",".join(c for c in CONFIGS if c not in OPT_IN))
    ap.add_argument("--mtu", type=int, default=1500)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--update-readme", action="store_true")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    configs = [c for c in CONFIGS if c in args.configs.split(",")]
    rank_counts = [int(r) for r in args.ranks.split(",")]
    programs = build_programs(args)
    load = os.getloadavg()[0]
    hosts = TwoHosts(args.mtu)
    samples = {}  # (config, ranks, figure, size) -> {round: value}
    try:
        for r in range(args.rounds):
            for ranks in rank_counts:
                for config in configs:
                    for key, v in run(config, ranks, programs, args, hosts).items():
                        samples.setdefault((config, ranks) + key, {})[r] = v
                    print(f"round {r + 1}/{args.rounds}: {config}, {ranks} ranks done", flush=True)
    finally:
        hosts.close()
    os.makedirs(args.out, exist_ok=True)
    report = write_report(args, configs, rank_counts, samples, load)
    with open(os.path.join(args.out, "mpi_hosts_latest.md"), "w") as f:
        f.write(report)
    with open(os.path.join(args.out, "mpi_hosts_results.json"), "w") as f:
        json.dump({" | ".join(map(str, k)): v for k, v in samples.items()}, f, indent=1)
    if "softverbs" in configs and "btl tcp" in configs:  # (the plot is one against the other)
        plot(os.path.join(args.out, "mpi_hosts_speed.png"), rank_counts, samples)
    print(report)
    if args.update_readme:
        update_readme(os.path.join(ROOT, "README.md"), BEGIN, END, report)




def speed(samples, ours, peer, ranks, figure, size):
    """How many times as good as the peer (> 1: better): the median of the rounds' ratios."""
    a, b = samples.get((ours, ranks, figure, size), {}), samples.get((peer, ranks, figure, size), {})
    if figure in HIGHER_IS_BETTER:
        ratios = [a[r] / b[r] for r in a if r in b and b[r]]
    else:
        ratios = [b[r] / a[r] for r in a if r in b and a[r]]
    return statistics.median(ratios) if ratios else None


def goal(figure, size):
    """Issue 37's goal against btl tcp, as a speed: >= 1.0 for every collective, kernel, the job and every
    point-to-point size from 4 KiB; 8 B latency within 1.2x."""
    if figure == "cpu":
        return None
    if figure == "lat" and size == 8:
        return 1 / 1.2
    if figure in ("lat", "bw") and size < 4096:
        return None
    return 1.0


def rows(samples, ranks):
    """(figure, size) of every row the samples hold for this rank count, in FIGURES' order."""
    keys = {(k[2], k[3]) for k in samples if k[1] == ranks}
    order = [f for f, _ in FIGURES]
    return sorted(keys, key=lambda k: (order.index(k[0]), k[1]))


def row_name(figure, size):
    unit = dict(FIGURES)[figure]
    if figure in ("lat", "bw", "allreduce", "alltoall", "bcast"):
        return f"{unit.split(',')[0]} {label(size)}"
    if figure in ("matmul", "transpose"):
        return f"{unit.split(' (')[0]} N={size}"
    return unit


def write_report(args, configs, rank_counts, samples, load):
    lines = [f"Measured {time.strftime('%Y-%m-%d')} with `bench/mpi_hosts.py --rounds {args.rounds}"
             f"{' --quick' if args.quick else ''}`: two network-namespace hosts on a veth (MTU {args.mtu}), "
             f"{args.rounds} interleaved rounds, medians; load average before: {load:.2f}. Units: latency and "
             f"collectives in us, kernels, job and CPU in seconds, bandwidth in MB/s. **x**: how many times as "
             f"good as the peer (its time / ours; for bandwidth ours / its; for CPU its seconds / ours), median "
             f"of the rounds' ratios; goal: issue 37's against btl tcp.\n"]
    for ranks in rank_counts:
        pairs = [(a, b) for a, b in PAIRS if a in configs and b in configs]
        shown = [c for c in CONFIGS if c in configs]
        lines.append(f"**{ranks} ranks ({ranks // 2} per host)**\n")
        head = "| figure | " + " | ".join(shown) + " | " + " | ".join(f"x {a} vs {b}" for a, b in pairs) + " | goal | met |"
        lines += [head, "|" + "---|" * (1 + len(shown) + len(pairs) + 2)]
        for figure, size in rows(samples, ranks):
            row = [row_name(figure, size)] + [fmt(median(samples, (c, ranks, figure, size))) for c in shown]
            row += [fmt(speed(samples, a, b, ranks, figure, size), 2) for a, b in pairs]
            g = goal(figure, size)
            s = speed(samples, "softverbs", "btl tcp", ranks, figure, size)
            row += ["-" if g is None else f">= {g:.2f}", "-" if g is None or s is None else ("yes" if s >= g else "no")]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    for config, ranks in sorted(hung_in_finalize):
        lines.append(f"{config} with {ranks} ranks hung in MPI_Finalize after its last figure (in some round): "
                     f"stopped after {FINALIZE_GRACE_S} s, its figures kept.\n")
    lines.append("![speed against btl tcp](bench/results/mpi_hosts_speed.png)\n")
    return "\n".join(lines)




def plot(path, rank_counts, samples):
    """softverbs' speed against btl tcp, row by row, one line per rank count."""
    names, blocks, tics = [], [], []
    all_rows = rows(samples, rank_counts[0])
    for i, (figure, size) in enumerate(all_rows):
        tics.append(f"'{row_name(figure, size)}' {i}")
    for ranks in rank_counts:
        pts = [(i, speed(samples, "softverbs", "btl tcp", ranks, f, s)) for i, (f, s) in enumerate(all_rows)]
        pts = [(i, v) for i, v in pts if v]
        if pts:
            names.append(f"softverbs vs btl tcp, {ranks} ranks")
            blocks.append("\n".join(f"{i} {v}" for i, v in pts) + "\ne")
    script = plot_style.header(path, len(names) + 1, plot_height=620) + [
        "set logscale y", f"set xtics rotate by -60 ({', '.join(tics)})", "set ylabel 'x as fast as btl tcp'",
        "set grid", f"set xrange [-0.5:{len(all_rows) - 0.5}]",
        "plot " + ", ".join(f"'-' with linespoints title '{t}'" for t in names) + ", 1 with lines dt 2 title 'parity'"]
    subprocess.run(["gnuplot"], input="\n".join(script + blocks) + "\n", text=True, check=True)


def label(size):
    for unit, name in ((1 << 20, " MiB"), (1 << 10, " KiB")):
        if size >= unit and size % unit == 0:
            return f"{size // unit}{name}"
    return f"{size} B"




if __name__ == "__main__":
    main()
