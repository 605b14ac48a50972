#!/usr/bin/python3
"""softverbs side by side with UCX and libfabric shared-memory transports.

One command, one run: Debian's perftest through softverbs and the peers of
../shared/brief/peers.md on the same sizes, rounds interleaved (softverbs,
then its peer, case by case) so that both see the same machine; medians of
the rounds are kept. Writes bench/results/latest.md (tables and the ratios
against the project's targets), latency.png, bandwidth.png, msgrate.png and
the raw numbers (results.json).

    bench/run.py [--rounds N] [--quick] [--build DIR] [--update-readme]

Units: latency in microseconds (perftest t_typical, UCX 50th percentile, both
one way); bandwidth in MiB/s (what perftest and ucx_perftest print;
fi_pingpong's decimal MB/s are converted); message rate in millions/s.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

import instructions
import plot_style

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PORT = 20100
UCX_ENV = {"UCX_TLS": "posix,cma,self"}


def listening(port):
    """Whether some socket listens on `port`, without connecting to it (the
    servers here accept exactly one connection)."""
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                for line in f.readlines()[1:]:
                    local, state = line.split()[1], line.split()[3]
                    if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                        return True
        except OSError:
            pass
    return False


def wait_listening(port, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        if listening(port):
            return True
        time.sleep(0.05)
    return False


def run_pair(server_cmd, client_cmd, env, port, timeout=120):
    """Starts the server, waits for its port, runs the client; client stdout."""
    full_env = dict(os.environ, **env)
    server = subprocess.Popen(server_cmd, env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if port and not wait_listening(port):
            raise RuntimeError("server did not listen: " + " ".join(server_cmd))
        if not port:
            time.sleep(0.5)
        out = subprocess.run(client_cmd, env=full_env, capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            raise RuntimeError(" ".join(client_cmd) + " failed:\n" + out.stdout + out.stderr)
        return out.stdout
    finally:
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def perftest(build, tool, size, iters, extra=(), mem_path=None):
    env = {"LD_LIBRARY_PATH": os.path.join(build, "lib")}
    if mem_path:
        env["SOFTVERBS_MEM_PATH"] = mem_path
    args = [tool, "-d", "softverbs0", "-p", str(PORT), "-s", str(size), "-n", str(iters), *extra]
    out = run_pair(args, args + ["127.0.0.1"], env, PORT)
    row = None
    for line in out.splitlines():
        if re.match(r"^\s*\d+\s+\d+\s+[\d.]+", line):
            row = line.split()
    if not row:
        raise RuntimeError(f"{tool}: no results row:\n{out}")
    if tool.endswith("_lat"):  # bytes iters t_min t_max t_typical ...
        return {"lat": float(row[4])}
    return {"bw": float(row[3]), "mpps": float(row[4])}  # bytes iters peak avg msgrate


def ucx(test, size, iters):
    server = ["ucx_perftest", "-p", str(PORT + 1)]
    client = server + ["127.0.0.1", "-t", test, "-s", str(size), "-n", str(iters)]
    out = run_pair(server, client, UCX_ENV, PORT + 1)
    for line in out.splitlines():
        if line.startswith("Final:"):
            f = line.split()  # Final: iters lat50 lat_avg lat_overall bw_avg bw_overall rate_avg rate_overall
            return {"lat": float(f[2]), "bw": float(f[5]), "mpps": float(f[7]) / 1e6}
    raise RuntimeError(f"ucx_perftest {test}: no Final row:\n{out}")


def fi_pingpong(size, iters):
    server = ["fi_pingpong", "-p", "shm", "-e", "rdm", "-I", str(iters), "-S", str(size), "-B", str(PORT + 2)]
    client = ["fi_pingpong", "-p", "shm", "-e", "rdm", "-I", str(iters), "-S", str(size), "-P", str(PORT + 2),
              "127.0.0.1"]
    out = run_pair(server, client, {}, 0)
    lines = [l.split() for l in out.splitlines() if re.match(r"^\s*\d+[kmg]?\s", l)]
    if not lines:
        raise RuntimeError(f"fi_pingpong: no results:\n{out}")
    f = lines[-1]  # bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
    return {"lat": float(f[6]), "bw": float(f[5]) * 1e6 / 2**20}


def cases(quick):
    lat_sizes = [8, 4096] if quick else [8, 64, 512, 4096, 32768]
    bw_sizes = [64, 4096, 1048576] if quick else [64, 1024, 4096, 65536, 1048576]
    lat_iters, rate_iters = (10000, 200000) if quick else (50000, 1000000)
    c = []
    for size in lat_sizes:
        c.append(("lat", "write", size, ("perftest", "ib_write_lat", size, lat_iters), ("ucx", "ucp_put_lat", size, lat_iters)))
        c.append(("lat", "send", size, ("perftest", "ib_send_lat", size, lat_iters), ("ucx", "tag_lat", size, lat_iters)))
        c.append(("lat", "send", size, None, ("fi", size, lat_iters)))
        c.append(("lat", "read", size, ("perftest", "ib_read_lat", size, lat_iters), ("ucx", "ucp_get", size, lat_iters)))
    c.append(("lat", "atomic", 8, ("perftest", "ib_atomic_lat", 8, lat_iters), ("ucx", "ucp_fadd", 8, lat_iters)))
    for size in bw_sizes:
        iters = max(1000, min(100000, 2 * 2**30 // size // 10))
        c.append(("bw", "write", size, ("perftest", "ib_write_bw", size, iters), ("ucx", "ucp_put_bw", size, iters)))
        c.append(("bw", "send", size, ("perftest", "ib_send_bw", size, iters), ("ucx", "tag_bw", size, iters)))
        c.append(("bw", "send", size, None, ("fi", size, max(100, iters // 10))))
    c.append(("rate", "send", 8, ("perftest", "ib_send_bw", 8, rate_iters), ("ucx", "tag_bw", 8, rate_iters)))
    return c


# The memory paths besides the default overlay (docs/ARCHITECTURE.md,
# "Registered memory"), forced for every registration: how much slower a peer
# is where memory cannot be shared (process_vm_readv/writev) and where even
# that is denied (the owner's bounce thread).
MEM_PATHS = ("cma", "bounce")


def path_cases(quick):
    return [("lat", "write", 8, "ib_write_lat", 10000 if quick else 50000),
            ("bw", "write", 1048576, "ib_write_bw", 2000),
            ("bw", "send", 1048576, "ib_send_bw", 2000)]


def measure(build, spec):
    kind = spec[0]
    if kind == "perftest":
        return perftest(build, spec[1], spec[2], spec[3])
    if kind == "ucx":
        return ucx(spec[1], spec[2], spec[3])
    return fi_pingpong(spec[1], spec[2])


def peer_name(spec):
    return "libfabric shm" if spec[0] == "fi" else "UCX"


def metric_of(group):
    return {"lat": "lat", "bw": "bw", "rate": "mpps"}[group]


# Issue 22's targets: (group, op, size, peer test, bound, direction).
TARGETS = [
    ("lat", "write", 8, "ucp_put_lat", 1.0, "<="),
    ("lat", "send", 8, "tag_lat", 1.0, "<="),
    ("lat", "read", 8, "ucp_get", 1.0, "<="),
    ("lat", "atomic", 8, "ucp_fadd", 1.0, "<="),
    ("bw", "write", 64, "ucp_put_bw", 1.0, ">="),
    ("bw", "write", 4096, "ucp_put_bw", 1.0, ">="),
    ("bw", "write", 1048576, "ucp_put_bw", 1.0, ">="),
    ("rate", "send", 8, "tag_bw", 1.0, ">="),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="fewer sizes and iterations")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--update-readme", action="store_true",
                    help="also put the tables and plots into README.md (between the bench markers)")
    ap.add_argument("--replot", action="store_true", help="only draw the figures again from OUT/results.json")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.replot:
        with open(os.path.join(args.out, "results.json")) as f:
            saved = json.load(f)
        samples = {}
        for key, v in saved.items():
            parts = key.split("|")
            if len(parts) == 5:  # (the instruction counts are not samples)
                samples[(parts[0], parts[1], parts[2], int(parts[3]), parts[4])] = v["rounds"]
        plot(args.out, samples)
        return

    plan = cases(args.quick)
    samples = {}  # (side, group, op, size, peer) -> [values]
    by_round = {}  # the same key -> {round: value}, to pair each round's two runs
    for r in range(args.rounds):
        for group, op, size, ours, peer in plan:
            for side, spec in (("softverbs", ours), (peer_name(peer), peer)):
                if spec is None:
                    continue
                key = (side, group, op, size, "fi_pingpong" if spec[0] == "fi" else spec[1])
                try:
                    value = measure(args.build, spec)[metric_of(group)]
                except Exception as e:  # a failed run is reported, not hidden
                    print(f"round {r + 1}: {side} {op} {size}: FAILED: {e}", file=sys.stderr)
                    continue
                samples.setdefault(key, []).append(value)
                by_round.setdefault(key, {})[r] = value
                print(f"round {r + 1}: {side:14} {group:4} {op:6} {size:8} {value:10.3f}", flush=True)
        for group, op, size, tool, iters in path_cases(args.quick):
            for path in MEM_PATHS:
                side = f"softverbs {path}"
                try:
                    value = perftest(args.build, tool, size, iters, mem_path=path)[metric_of(group)]
                except Exception as e:
                    print(f"round {r + 1}: {side} {op} {size}: FAILED: {e}", file=sys.stderr)
                    continue
                samples.setdefault((side, group, op, size, tool), []).append(value)
                print(f"round {r + 1}: {side:14} {group:4} {op:6} {size:8} {value:10.3f}", flush=True)
    result = {"|".join(map(str, k)): {"median": statistics.median(v), "rounds": v} for k, v in samples.items()}
    counts = instructions.per_operation(args.build)
    result.update({f"instructions|{mode}": n for mode, n in counts.items()})
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(result, f, indent=1)
    report = write_report(args, plan, samples, by_round, counts)
    plot(args.out, samples)
    if args.update_readme:
        update_readme(os.path.join(ROOT, "README.md"), report, os.path.relpath(args.out, ROOT))


BEGIN, END = "<!-- bench:begin (bench/run.py --update-readme) -->", "<!-- bench:end -->"


def update_readme(path, report, results_dir):
    """Replaces what stands between the bench markers with the report."""
    with open(path) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{path}: no bench markers")
    for name in ("latency.png", "bandwidth.png", "msgrate.png"):
        report = report.replace(f"({name})", f"({results_dir}/{name})")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(path, "w") as f:
        f.write(head + BEGIN + "\n" + report + END + tail)


def med(samples, key):
    v = samples.get(key)
    return statistics.median(v) if v else None


def paired_ratios(by_round, ours_key, peer_key):
    """softverbs / peer for each round where both ran (they ran back to back)."""
    a, b = by_round.get(ours_key, {}), by_round.get(peer_key, {})
    return [a[r] / b[r] for r in sorted(a) if r in b and b[r]]


def cpu_model():
    """The CPU's model name: shared-memory figures depend on it (a line's trip
    between two cores costs several times more on some parts than others)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def write_report(args, plan, samples, by_round, counts):
    lines = []
    meta = (f"{time.strftime('%Y-%m-%d')} on {cpu_model()}, {args.rounds} interleaved rounds, medians; "
            f"load average before: {os.getloadavg()[0]:.2f}; UCX_TLS=posix,cma,self; softverbs memory path: overlay "
            "(registered pages shared, plain loads and stores); CPU placement: none (both processes of a pair "
            f"float over the machine's {os.cpu_count()} CPUs, as the kernel schedules them)")
    lines.append(f"Measured {meta}.\n")
    lines.append("### Against the targets\n")
    lines.append("The ratio is the median of the rounds' ratios: each round runs softverbs and its peer back to "
                 "back, so a ratio compares two runs that saw the same machine (these vCPUs move between sibling "
                 "hyperthreads of one core and separate cores, which changes shared-memory latency several-fold).\n")
    lines.append("| softverbs | peer | softverbs | peer | ratio | ratio per round | target | met |")
    lines.append("|---|---|---|---|---|---|---|---|")
    tool_of = {("lat", "write"): "ib_write_lat", ("lat", "send"): "ib_send_lat", ("lat", "read"): "ib_read_lat",
               ("lat", "atomic"): "ib_atomic_lat", ("bw", "write"): "ib_write_bw", ("bw", "send"): "ib_send_bw", ("rate", "send"): "ib_send_bw"}
    unit = {"lat": "us", "bw": "MiB/s", "rate": "Mmsg/s"}
    for group, op, size, peer_test, bound, direction in TARGETS:
        tool = tool_of[(group, op)]
        ours_key, peer_key = ("softverbs", group, op, size, tool), ("UCX", group, op, size, peer_test)
        ours, theirs = med(samples, ours_key), med(samples, peer_key)
        ratios = paired_ratios(by_round, ours_key, peer_key)
        if ours is None or theirs is None or not ratios:
            continue
        ratio = statistics.median(ratios)
        met = ratio <= bound if direction == "<=" else ratio >= bound
        each = " ".join(f"{x:.2f}" for x in ratios)
        lines.append(f"| `{tool} -s {size}` | `ucx_perftest -t {peer_test} -s {size}` | {ours:.3f} {unit[group]} | "
                     f"{theirs:.3f} {unit[group]} | {ratio:.2f} | {each} | {direction} {bound} | "
                     f"{'yes' if met else 'no'} |")
    for group, title in (("lat", "Latency (us, one way)"), ("bw", "Bandwidth (MiB/s)"), ("rate", "Message rate (M/s)")):
        lines.append(f"\n### {title}\n")
        lines.append("| operation | size | softverbs | UCX | softverbs / UCX | libfabric shm | softverbs / libfabric |")
        lines.append("|---|---|---|---|---|---|---|")
        seen = set()
        for g, op, size, ours, peer in plan:
            if g != group or ours is None or (op, size) in seen:
                continue
            seen.add((op, size))
            o = med(samples, ("softverbs", g, op, size, ours[1]))
            u = med(samples, ("UCX", g, op, size, peer[1]))
            fi = med(samples, ("libfabric shm", g, op, size, "fi_pingpong"))
            cell = lambda v: f"{v:.3f}" if v is not None else "-"
            ratio = lambda a, b: f"{a / b:.2f}" if a is not None and b else "-"
            lines.append(f"| {ours[1]} ({peer[1]}) | {size} | {cell(o)} | {cell(u)} | {ratio(o, u)} | {cell(fi)} | "
                         f"{ratio(o, fi)} |")
    lines.append("\n### Memory paths (softverbs alone)\n")
    lines.append("Every figure above uses the overlay. Forced for every registration "
                 "(`SOFTVERBS_MEM_PATH`), the other two paths, same rounds:\n")
    lines.append("| operation | size | overlay (default) | cma: process_vm_readv/writev | bounce: owner's thread copies |")
    lines.append("|---|---|---|---|---|")
    for group, op, size, tool, _ in path_cases(args.quick):
        vals = [med(samples, ("softverbs", group, op, size, tool))] + \
               [med(samples, (f"softverbs {p}", group, op, size, tool)) for p in MEM_PATHS]
        cells = " | ".join(f"{v:.3f} {unit[group]}" if v is not None else "-" for v in vals)
        lines.append(f"| {tool} | {size} | {cells} |")
    lines += instructions.report_lines(counts)
    lines.append("\n![latency](latency.png) ![bandwidth](bandwidth.png) ![message rate](msgrate.png)")
    lines.append(f"\nCommand: `bench/run.py --rounds {args.rounds}{' --quick' if args.quick else ''}`")
    report = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "latest.md"), "w") as f:
        f.write(report)
    print(report)
    return report


def plot(out, samples):
    """latency.png, bandwidth.png and msgrate.png with gnuplot."""
    series = {}
    for (side, group, op, size, test), v in samples.items():
        if side.startswith("softverbs "):  # the forced memory paths: a table of their own
            continue
        series.setdefault((group, f"{side} {op} ({test})"), []).append((size, statistics.median(v)))
    def data_block(group):
        blocks, titles = [], []
        for (g, title), pts in sorted(series.items()):
            if g != group:
                continue
            titles.append(title)
            blocks.append("\n".join(f"{s} {v}" for s, v in sorted(pts)) + "\ne")
        return titles, blocks
    for group, fname, ylabel, yscale in (("lat", "latency.png", "one-way latency (us)", "set logscale y"),
                                         ("bw", "bandwidth.png", "bandwidth (MiB/s)", "set logscale y")):
        titles, blocks = data_block(group)
        if not titles:
            continue
        script = plot_style.header(os.path.join(out, fname), len(titles)) + [
                  "set logscale x 2", yscale, "set xlabel 'message size (bytes)'", f"set ylabel '{ylabel}'",
                  "set grid",
                  "plot " + ", ".join(f"'-' with linespoints title '{t}'" for t in titles)]
        subprocess.run(["gnuplot"], input="\n".join(script + blocks) + "\n", text=True, check=True)
    rates = [(t, pts[0][1]) for (g, t), pts in sorted(series.items()) if g == "rate"]
    if rates:
        script = plot_style.header(os.path.join(out, "msgrate.png"), 0, width=760, plot_height=440) + [
                  "set style fill solid", "set xtics rotate by -20", "set boxwidth 0.6", "set ylabel 'messages per second (millions), 8 bytes'",
                  "set yrange [0:*]", "set grid ytics",
                  "plot '-' using 0:2:xtic(1) with boxes notitle"]
        data = "\n".join(f"\"{t}\" {v}" for t, v in rates) + "\ne"
        subprocess.run(["gnuplot"], input="\n".join(script) + "\n" + data + "\n", text=True, check=True)


if __name__ == "__main__":
    main()
