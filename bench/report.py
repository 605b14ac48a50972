"""What bench/mpi.py and bench/mpi_hosts.py write alike: figures in tables,
and their report put between its markers in the README (--update-readme)."""
import statistics


def median(samples, key):
    """The median over rounds of samples[key] ({round: value}), or None."""
    v = samples.get(key)
    return statistics.median(v.values()) if v else None


def fmt(v, digits=None):
    if v is None:
        return "-"
    if digits is not None:
        return f"{v:.{digits}f}"
    return f"{v:.3f}" if v < 10 else f"{v:.1f}"


def update_readme(path, begin, end, report):
    with open(path) as f:
        text = f.read()
    if begin not in text or end not in text:
        raise SystemExit(f"{path}: no markers {begin} ... {end}")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(path, "w") as f:
        f.write(head + begin + "\n" + report + end + tail)
