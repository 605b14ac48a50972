#!/usr/bin/python3
"""MPI over softverbs beside MPI's own transports, in one run.

Open MPI 4.1 runs bench/mpi/pingpong.c (OSU-style ping-pong latency and
windowed bandwidth, 8 B to 1 MiB) with 2 ranks, rounds interleaved so that
every configuration of a round sees the same machine:

  one host     softverbs     pml ucx, UCX_TLS=rc_verbs,ud_verbs,self (softverbs-run)
               vader         pml ob1, btl vader,self (Open MPI's shared memory)
               UCX posix     pml ucx, UCX_TLS=posix,cma,self (UCX's shared memory)
  two hosts    softverbs     as above, one rank in each of two network namespaces
  (--hosts)    TCP           pml ob1, btl tcp,self on the same veth link

Ranks are not bound to cores (--bind-to none, every configuration): two
namespaces' ranks would otherwise both be bound to core 0.
Writes bench/results/mpi_latest.md, mpi_latency.png, mpi_bandwidth.png and
mpi_results.json; --update-readme puts the tables in the README.

    bench/mpi.py [--rounds N] [--quick] [--no-hosts] [--build DIR] [--update-readme]
"""

import argparse
import json
import os
import statistics
import subprocess
import time

import plot_style
from report import fmt, median, update_readme

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AGENT = os.path.join(ROOT, "tests", "middleware", "ns_agent.sh")
BEGIN, END = "<!-- mpi-bench:begin (bench/mpi.py --update-readme) -->", "<!-- mpi-bench:end -->"
SIZES = [8, 64, 512, 4096, 32768, 262144, 1048576]
UCX_SV = ["-x", "UCX_TLS=rc_verbs,ud_verbs,self", "-x", "UCX_NET_DEVICES=softverbs0:1"]

# name -> (where, mpirun arguments, under softverbs-run)
CONFIGS = {
    "softverbs": ("host", ["--mca", "pml", "ucx", "--mca", "pml_ucx_devices", "any", "--mca", "osc", "ucx",
                           "--mca", "btl", "self"] + UCX_SV, True),
    "vader": ("host", ["--mca", "pml", "ob1", "--mca", "btl", "vader,self"], False),
    "UCX posix": ("host", ["--mca", "pml", "ucx", "--mca", "pml_ucx_devices", "any", "--mca", "pml_ucx_tls",
                           "any", "--mca", "osc", "ucx", "--mca", "btl", "self",
                           "-x", "UCX_TLS=posix,cma,self"], False),
    "softverbs (2 hosts)": ("hosts", ["--mca", "pml", "ucx", "--mca", "pml_ucx_devices", "any",
                                      "--mca", "osc", "ucx", "--mca", "btl", "self"] + UCX_SV, True),
    "TCP (2 hosts)": ("hosts", ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
                                "--mca", "btl_tcp_if_include", "10.97.0.0/24"], False),
}
PEERS = {"host": ("softverbs", ["vader", "UCX posix"]), "hosts": ("softverbs (2 hosts)", ["TCP (2 hosts)"])}


class TwoHosts:
    """Network namespaces A (10.97.0.1) and B (10.97.0.2) on a veth pair."""

    def __init__(self):
        pid = os.getpid()
        self.a, self.b = f"bmA{pid}", f"bmB{pid}"
        va, vb = f"bma{pid}", f"bmb{pid}"
        for cmd in (["ip", "netns", "add", self.a], ["ip", "netns", "add", self.b],
                    ["ip", "link", "add", va, "netns", self.a, "type", "veth", "peer", "name", vb, "netns", self.b],
                    ["ip", "-n", self.a, "addr", "add", "10.97.0.1/24", "dev", va],
                    ["ip", "-n", self.b, "addr", "add", "10.97.0.2/24", "dev", vb],
                    ["ip", "-n", self.a, "link", "set", "lo", "up"], ["ip", "-n", self.b, "link", "set", "lo", "up"],
                    ["ip", "-n", self.a, "link", "set", va, "up"], ["ip", "-n", self.b, "link", "set", vb, "up"]):
            subprocess.run(cmd, check=True)

    def close(self):
        for ns in (self.a, self.b):
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)


def run(config, args, program, hosts):
    """One job; {("lat"|"bw", size): value}."""
    where, mpi_args, under_softverbs = CONFIGS[config]
    cmd = ["mpirun.openmpi", "-np", "2", "--bind-to", "none", "--mca", "btl_base_warn_component_unused", "0"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += mpi_args
    env = dict(os.environ)
    run_tool = os.path.join(args.build, "bin", "softverbs-run")
    if where == "hosts":
        cmd += ["-H", "10.97.0.1:1,10.97.0.2:1", "--mca", "plm_rsh_agent", AGENT, "--mca", "plm_rsh_no_tree_spawn",
                "1", "--mca", "oob_tcp_if_include", "10.97.0.0/24"]
        env.update(SV_HOSTS=f"10.97.0.1={hosts.a} 10.97.0.2={hosts.b}",
                   SOFTVERBS_RUN=run_tool if under_softverbs else "env")
    cmd += [program] + [str(s) for s in args.sizes]
    if under_softverbs:
        cmd = [run_tool] + cmd
    if where == "hosts":
        cmd = ["ip", "netns", "exec", hosts.a] + cmd
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"{config}: exit {out.returncode}\n{out.stdout}\n{out.stderr}")
    values = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] in ("lat", "bw"):
            values[(parts[0], int(parts[1]))] = float(parts[2])
    return values


def build_program(args):
    program = os.path.join(args.build, "bin", "mpi_pingpong")
    src = os.path.join(ROOT, "bench", "mpi", "pingpong.c")
    if not os.path.exists(program) or os.path.getmtime(program) < os.path.getmtime(src):
        subprocess.run(["mpicc.openmpi", "-O2", "-o", program, src], check=True)
    return program


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="3 sizes")
    ap.add_argument("--no-hosts", action="store_true", help="one host only (no network namespaces)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--update-readme", action="store_true")
    ap.add_argument("--replot", action="store_true", help="only draw the figures again from OUT/mpi_results.json")
    args = ap.parse_args()
    if args.replot:
        with open(os.path.join(args.out, "mpi_results.json")) as f:
            saved = json.load(f)
        samples = {}
        for key, rounds in saved.items():
            config, metric, size = key.rsplit(" ", 2)
            samples[(config, metric, int(size))] = rounds
        configs = [c for c in CONFIGS if any(k[0] == c for k in samples)]
        plot(args.out, configs, samples, sorted({k[2] for k in samples}))
        return
    args.build = os.path.abspath(args.build)
    args.sizes = [8, 4096, 1048576] if args.quick else SIZES
    program = build_program(args)
    configs = [c for c in CONFIGS if not (args.no_hosts and CONFIGS[c][0] == "hosts")]
    load = os.getloadavg()[0]
    hosts = None if args.no_hosts else TwoHosts()
    samples = {}  # (config, metric, size) -> [value per round]
    try:
        for r in range(args.rounds):
            for config in configs:
                for key, v in run(config, args, program, hosts).items():
                    samples.setdefault((config,) + key, {})[r] = v
                print(f"round {r + 1}/{args.rounds}: {config} done", flush=True)
    finally:
        if hosts:
            hosts.close()
    os.makedirs(args.out, exist_ok=True)
    report = write_report(args, configs, samples, load)
    with open(os.path.join(args.out, "mpi_latest.md"), "w") as f:
        f.write(report)
    with open(os.path.join(args.out, "mpi_results.json"), "w") as f:
        json.dump({" ".join(map(str, k)): v for k, v in samples.items()}, f, indent=1)
    plot(args.out, configs, samples, args.sizes)
    print(report)
    if args.update_readme:
        update_readme(os.path.join(ROOT, "README.md"), BEGIN, END, report)




def ratio_median(samples, ours, peer, metric, size):
    """The median of the rounds' ratios (each round ran both back to back)."""
    a, b = samples.get((ours, metric, size), {}), samples.get((peer, metric, size), {})
    ratios = [a[r] / b[r] for r in a if r in b and b[r]]
    return statistics.median(ratios) if ratios else None


def write_report(args, configs, samples, load):
    lines = [f"Measured {time.strftime('%Y-%m-%d')} with `bench/mpi.py --rounds {args.rounds}`: Open MPI 4.1, "
             f"2 ranks, {args.rounds} interleaved rounds, medians (ratios: median of the rounds' ratios); "
             f"load average before: {load:.2f}.\n"]
    for where, title in (("host", "One host"), ("hosts", "Two hosts (network namespaces, veth, MTU 1500)")):
        ours, peers = PEERS[where]
        peers = [p for p in peers if p in configs]
        if ours not in configs:
            continue
        for metric, unit, better in (("lat", "latency, us (one way)", "lower"), ("bw", "bandwidth, MB/s", "higher")):
            lines.append(f"**{title}: {unit}** ({better} is better)\n")
            head = f"| size | {ours} | " + " | ".join(f"{p} | {ours} / {p}" for p in peers) + " |"
            lines += [head, "|" + "---|" * (2 + 2 * len(peers))]
            for size in args.sizes:
                row = [str(size), fmt(median(samples, (ours, metric, size)))]
                for p in peers:
                    row += [fmt(median(samples, (p, metric, size))), fmt(ratio_median(samples, ours, p, metric, size), 2)]
                lines.append("| " + " | ".join(row) + " |")
            lines.append("")
    lines.append("![MPI latency](bench/results/mpi_latency.png) ![MPI bandwidth](bench/results/mpi_bandwidth.png)\n")
    return "\n".join(lines)




def plot(out, configs, samples, sizes):
    for metric, fname, ylabel in (("lat", "mpi_latency.png", "one-way latency (us)"),
                                  ("bw", "mpi_bandwidth.png", "bandwidth (MB/s)")):
        titles, blocks = [], []
        for config in configs:
            pts = [(s, median(samples, (config, metric, s))) for s in sizes]
            pts = [(s, v) for s, v in pts if v]
            if pts:
                titles.append(config)
                blocks.append("\n".join(f"{s} {v}" for s, v in pts) + "\ne")
        tics = ", ".join(f"'{label(s)}' {s}" for s in sizes)
        script = plot_style.header(os.path.join(out, fname), len(titles)) + [
                  "set logscale x 2", "set logscale y", f"set xtics ({tics})", "set xlabel 'message size (bytes)'",
                  f"set ylabel '{ylabel}'", "set grid",
                  "plot " + ", ".join(f"'-' with linespoints title '{t}'" for t in titles)]
        subprocess.run(["gnuplot"], input="\n".join(script + blocks) + "\n", text=True, check=True)


def label(size):
    for unit, name in ((1 << 20, "M"), (1 << 10, "K")):
        if size >= unit and size % unit == 0:
            return f"{size // unit}{name}"
    return str(size)




if __name__ == "__main__":
    main()
