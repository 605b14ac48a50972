#!/usr/bin/env bash
# The CI jobs and the Dockerfile of docs/ci.md, run as far as this machine
# can: each in a fresh root of its own (the machine's root with a tmpfs on
# top, a /dev of its own), as root without CAP_SYS_ADMIN, as in a container.
# Every shell line of the GitHub Actions steps, of the GitLab job and of the
# Dockerfile's RUN and ENTRYPOINT runs, in order, but those that need the
# network or build softverbs from a clone (named "not run here"; the README's
# commands build the same package, which is what the jobs then install).
# "The project's tests" the jobs run are a stand-in, tests/rdma/run_all.sh:
# an ibv_rc_pingpong pair.
#   ci_docs_test.sh BUILD_DIR SOURCE_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/overlay_root.sh"
build=$1 src=$2
((EUID == 0)) || { echo "needs root (mount namespaces)"; exit 77; }
for tool in cpack dpkg-shlibdeps apt-get unshare pivot_root setpriv python3; do
  command -v $tool >/dev/null || { echo "$tool is not installed"; exit 77; }
done
python3 -c "import yaml" 2>/dev/null || { echo "python3-yaml is not installed"; exit 77; }

work=$(mktemp -d /tmp/softverbs-ci-docs.XXXXXX)
trap 'rm -rf "$work"' EXIT
deb=$(the_package "$build" "$work/deb") || { echo "FAIL: cpack"; exit 1; }

# Each document as a list of shell commands, one per line of output.
python3 - "$src/docs/ci" >"$work/steps" <<'PY' || { echo "FAIL: cannot read the documents"; exit 1; }
import json, re, sys, yaml
d = sys.argv[1]
# docs/ci.md shows each file: every line of it but comments must be there.
page = open(f"{d}/../ci.md").read()
for name in ("github-actions.yml", "gitlab-ci.yml", "Dockerfile"):
    for line in open(f"{d}/{name}").read().splitlines():
        if line.strip() and not line.lstrip().startswith("#") and line not in page:
            sys.exit(f"docs/ci.md does not show this line of docs/ci/{name}: {line}")
gh = yaml.safe_load(open(f"{d}/github-actions.yml"))
for step in next(iter(gh["jobs"].values()))["steps"]:
    for line in step.get("run", "").splitlines():
        print("github\t" + line)
gl = next(iter(v for k, v in yaml.safe_load(open(f"{d}/gitlab-ci.yml")).items() if isinstance(v, dict)))
for line in gl.get("before_script", []) + gl["script"]:
    print("gitlab\t" + line)
text = open(f"{d}/Dockerfile").read().replace("\\\n", " ")
entry = cmd = None
for line in text.splitlines():
    word, _, rest = line.strip().partition(" ")
    if word == "COPY":
        print("docker\tcp /tmp/softverbs-deb/softverbs_*.deb /tmp/")  # (the build context holds the .deb)
    elif word == "RUN":
        for command in rest.split("&&"):
            print("docker\t" + " ".join(command.split()))
    elif word == "ENTRYPOINT":
        entry = json.loads(rest)
    elif word == "CMD":
        cmd = json.loads(rest)
import shlex
print("docker\t" + " ".join(shlex.quote(w) for w in entry + cmd))  # docker run IMAGE: its default command
PY

# What the jobs call "the project's tests".
mkdir -p "$work/project/tests/rdma"
cat >"$work/project/tests/rdma/run_all.sh" <<'EOF'
#!/bin/sh
gid=$(ibv_devinfo -v | sed -nE 's/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]+::ffff:127\.0\.0\.1,.*/\1/p' | head -1)
ibv_rc_pingpong -g "$gid" -p 18999 -n 100 -c >/tmp/server.out 2>&1 &
sleep 1
ibv_rc_pingpong -g "$gid" -p 18999 -n 100 -c 127.0.0.1 && wait $! && echo "the project's RDMA tests passed"
EOF
chmod +x "$work/project/tests/rdma/run_all.sh"

not_here='^apt-get update|git clone|install-deps\.sh|^cmake |^cpack |install -y --no-install-recommends git '
fail=0
for doc in github gitlab docker; do
  ovl=$work/ovl.$doc
  mkdir "$ovl"
  unshare --mount --propagation private bash -s "$ovl" "$deb" "$work" "$doc" "$not_here" "$here" >"$work/$doc.log" 2>&1 <<'INNER'
set -u
ovl=$1 deb=$2 work=$3 doc=$4 not_here=$5 here=$6
source "$here/overlay_root.sh"
make_overlay_root "$ovl" || exit 1
mkdir -p "$ovl/root/tmp/softverbs-deb" && cp "$deb" "$ovl/root/tmp/softverbs-deb/" || exit 1
rc=0
while IFS=$'\t' read -r d line; do
  [[ $d == "$doc" ]] || continue
  if [[ $line =~ $not_here ]]; then echo "not run here: $line"; continue; fi
  echo "+ $line"
  # A container's root: no CAP_SYS_ADMIN (so no namespaces for softverbs-run).
  out=$(in_root_of "$ovl" setpriv --bounding-set=-sys_admin env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
        DEBIAN_FRONTEND=noninteractive bash -c "cd '$work/project' && $line" 2>&1)
  step_rc=$?
  if ((step_rc)); then echo "$out"; echo "FAIL: exit $step_rc"; rc=1; break; fi
  echo "$out" | tail -n 3
  [[ $line == *ibv_devinfo* && $out != *softverbs0* ]] && { echo "FAIL: no softverbs0"; rc=1; }
  [[ $line == *run_all.sh* && $out != *"tests passed"* ]] && { echo "FAIL: the project's tests did not pass"; rc=1; }
done <"$work/steps"
exit $rc
INNER
  rc=$?
  echo "--- $doc ($([[ $rc == 0 ]] && echo ok || echo FAILED))"
  cat "$work/$doc.log"
  ((rc == 0)) || fail=1
done
exit $fail
