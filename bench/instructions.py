"""Instructions per verbs operation, counted by callgrind.

Time on these shared 2-vCPU machines swings with where the two processes
land; instruction counts repeat exactly. `softverbs_count_ops MODE N`
(bench/micro/count_ops.cpp) runs N operations through a loopback QP pair in
one process; the count for N minus the count for a short run, divided by
the difference, is what one operation costs, start-up excluded. (In one
process a WRITE lands in the owner's own memory, `write_to_mr_slow`, not
through the overlay mapping two processes use.)
"""

import os
import shutil
import subprocess
import tempfile

MODES = (
    ("write", "8-byte RDMA WRITE, 1 in 64 signaled"),
    ("read", "8-byte RDMA READ, signaled, polled"),
    ("send", "8-byte SEND: post_recv, post_send, receiver's poll (1 in 64 signaled)"),
    ("write_lat", "ib_write_lat's step: inline signaled WRITE and its poll"),
    ("send_lat", "ib_send_lat's step: post_recv, inline signaled SEND, both polls"),
)
LONG, SHORT = 20000, 1000


def _instructions(binary, mode, n, env):
    with tempfile.NamedTemporaryFile(suffix=".callgrind") as out:
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out.name}", binary, mode, str(n)],
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=600)
        for line in open(out.name):
            if line.startswith("summary:"):
                return int(line.split()[1])
    raise RuntimeError(f"no callgrind summary for {mode} {n}")


def per_operation(build):
    """{mode: instructions per operation}, or {} without valgrind or the binary."""
    binary = os.path.join(build, "bin", "softverbs_count_ops")
    if not shutil.which("valgrind") or not os.path.exists(binary):
        return {}
    # (valgrind cannot reserve the default arena's address space)
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, "lib"), SOFTVERBS_ARENA_GB="1")
    counts = {}
    for mode, _ in MODES:
        long_run, short_run = _instructions(binary, mode, LONG, env), _instructions(binary, mode, SHORT, env)
        counts[mode] = round((long_run - short_run) / (LONG - SHORT))
    return counts


def report_lines(counts):
    if not counts:
        return []
    lines = ["\n### Instructions per operation (softverbs alone)\n",
             "Counted by callgrind in `softverbs_count_ops` (bench/instructions.py): unlike the times above, "
             "these repeat exactly from run to run, so a change to the path shows here first.\n",
             "| operation | instructions |", "|---|---|"]
    lines += [f"| {what} (`{mode}`) | {counts[mode]} |" for mode, what in MODES if mode in counts]
    return lines
