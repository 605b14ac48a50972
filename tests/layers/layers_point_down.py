#!/usr/bin/env python3
"""Every #include in src/ points down the layers (docs/ARCHITECTURE.md,
"Layers"): a layer may include itself and the layers this table gives it,
nothing above. The build links each layer only to the ones below
(src/CMakeLists.txt); this also catches header-only reach upwards, which
links fine. Prints every offending line; fails if there is one.
    layers_point_down.py SRC_DIR"""
import pathlib
import re
import sys

ALLOWED = {
    "util": set(),
    "net": set(),
    "ibcm": {"util"},
    "faults": {"net", "util"},
    "shm": {"util"},
    "hostd": {"shm", "util", "net", "ibcm"},
    "core": {"shm", "util", "net", "faults"},
    "transport": {"core", "shm", "util", "net", "ibcm", "hostd", "faults"},
    "verbs": {"transport", "core", "shm", "util", "net", "ibcm", "hostd", "faults"},
    # librdmacm reaches verbs only through the public libibverbs API.
    "rdmacm": {"ibcm", "net", "util", "faults"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')

src = pathlib.Path(sys.argv[1])
bad = []
checked = 0
for layer, allowed in ALLOWED.items():
    for f in sorted((src / layer).rglob("*")):
        if f.suffix not in {".h", ".hpp", ".cpp", ".c"}:
            continue
        checked += 1
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if m and m.group(1) in ALLOWED and m.group(1) != layer and m.group(1) not in allowed:
                bad.append(f"{f.relative_to(src)}:{n}: {layer}/ includes {m.group(1)}/: {line.strip()}")
unknown = sorted(p.name for p in src.iterdir() if p.is_dir() and p.name not in ALLOWED)
if unknown:
    bad.append(f"directories in no layer: {', '.join(unknown)} (add them to ALLOWED)")
print("\n".join(bad) if bad else f"{checked} files: every include points down")
sys.exit(1 if bad else 0)
