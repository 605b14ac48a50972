#!/usr/bin/env bash
# The timeline (SOFTVERBS_TRACE): ibv_rc_pingpong's two processes each
# write a Chrome trace-event file that parses as JSON, with a named track
# for the QP, its state changes, each SEND from post to completion and each
# receive completion;
# with an injected fault, the fault, the failed SEND with its status, and
# the QP's move to ERR. (The faulted run's server is killed, its client
# gone: its file stops there, without the closing bracket, which the
# format allows.)
#   trace_e2e.sh SOURCE_DIR
set -u
here=$1
source "$here/../common/tool_pair.sh"
command -v ibv_rc_pingpong >/dev/null || { echo "ibverbs-utils not installed"; exit 77; }
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT
gid=$("$here/../common/loopback_gid.sh") || { echo "FAIL: no GID for 127.0.0.1"; exit 1; }
port=$((16400 + RANDOM % 200))  # (a range no fixed-port test uses)
run() {  # run NAME CLIENT_FAULTS: a pingpong pair of 20 iterations, both traced to $work/NAME
  tool_pair "$work/$1.out" "SOFTVERBS_TRACE=$work/$1" "SOFTVERBS_TRACE=$work/$1 SOFTVERBS_FAULTS=$2" \
    ibv_rc_pingpong -g "$gid" -n 20
}
run clean ""
run faulted "wc=REM_ACCESS_ERR,nth=3"
python3 - "$work" <<'PY'
import glob, json, sys
work = sys.argv[1]
fail = False
def check(what, ok):
    global fail
    print(("ok:   " if ok else "FAIL: ") + what)
    fail |= not ok
for name in ("clean", "faulted"):
    files = sorted(glob.glob(f"{work}/{name}.*.json"))
    check(f"{name}: one file per process (2)", len(files) == 2)
    sends, recvs, states, faults, statuses = 0, 0, [], 0, set()
    for f in files:
        text = open(f).read()
        if not text.rstrip().endswith("]"):  # (a process killed before its exit: the format allows it)
            text += "\n]"
        try:
            events = json.loads(text)
        except ValueError as e:
            check(f"{name}: {f} parses as JSON ({e})", False)
            continue
        tracks = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
        check(f"{name}: {f.rsplit('/', 1)[1]}: a track named for its QP ({list(tracks.values())})",
              any(v.startswith("QP 0x") and v.endswith(" RC") for v in tracks.values()))
        for e in events:
            if e.get("cat") == "wr" and e["name"] == "SEND":
                sends += 1
                statuses.add(e["args"]["status"])
                assert e["ph"] == "X" and e["dur"] >= 0 and e["tid"] in tracks
            elif e.get("cat") == "recv":
                recvs += 1
                assert e["ph"] == "i" and e["tid"] in tracks and e["args"]["bytes"] > 0
            elif e.get("cat") == "state":
                states.append(e["name"])
            elif e.get("cat") == "event" and e["name"] == "fault":
                faults += 1
    if name == "clean":
        check(f"clean: 20 SENDs in each process, from post to completion ({sends})", sends == 40)
        check("clean: every SEND succeeded", statuses == {"success"})
        check(f"clean: 20 receive completions in each process, on the QP's track ({recvs})", recvs == 40)
        check("clean: the QPs went RESET, INIT, RTR, RTS", [s for s in states if s != "RESET"][:3] == ["INIT", "RTR", "RTS"])
        check("clean: no fault", faults == 0)
    else:
        check("faulted: the injected fault is on the timeline", faults == 1)
        check("faulted: the SEND it failed, with its status", "remote access error" in statuses)
        check("faulted: the QP to ERR", "ERR" in states)
sys.exit(1 if fail else 0)
PY
