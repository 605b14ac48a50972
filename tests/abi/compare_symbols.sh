#!/usr/bin/env bash
# compare_symbols.sh [--expect VERSION=COUNT]... OUR_LIB SYSTEM_LIB
# compare_symbols.sh --list LIB
#
# Checks that two shared libraries export the same dynamic symbol table.
# From `objdump -T` it takes every *defined* symbol (anything not *UND*,
# including the *ABS* entries that name each version definition) as the
# triple
#     VERSION NAME TYPE
# where VERSION is printed as objdump shows it: "(IBVERBS_1.0)" for a hidden
# (compat, non-default) version, "IBVERBS_1.1" for the default one, "Base"
# for an unversioned symbol; TYPE is objdump's DF (function) / DO (object).
# Both lists are sorted and diffed; any difference fails.
#
# --expect VERSION=COUNT additionally requires exactly COUNT symbols of that
# version in both tables, not counting the version definition's own ABS
# entry (e.g. --expect '(IBVERBS_1.0)=33' --expect IBVERBS_PRIVATE_34=71).
# This keeps the check from passing on two equally broken tables.
#
# --list LIB prints LIB's table in that form and exits (for debugging).
#
# Exit status: 0 identical, 1 different (or a count is wrong), 2 usage error
# or a library / tool is missing.
set -euo pipefail

OBJDUMP=${OBJDUMP:-objdump}
expects=()
list_only=0

usage() {
  echo "usage: $0 [--expect VERSION=COUNT]... OUR_LIB SYSTEM_LIB" >&2
  echo "       $0 --list LIB" >&2
  exit 2
}

while (($#)); do
  case $1 in
    --expect) (($# >= 2)) || usage; expects+=("$2"); shift 2 ;;
    --expect=*) expects+=("${1#--expect=}"); shift ;;
    --list) list_only=1; shift ;;
    -h|--help) usage ;;
    --) shift; break ;;
    -*) usage ;;
    *) break ;;
  esac
done
die() { echo "compare_symbols: FATAL: $*" >&2; exit 2; }

if ((list_only)); then
  (($# == 1)) || usage
  ours=$1
  system=$1
else
  (($# == 2)) || usage
  ours=$1
  system=$2
fi

[[ -f $system && -r $system ]] ||
  die "system library '$system' is missing or unreadable: cannot compare against it (is the Debian package installed?)"
[[ -f $ours && -r $ours ]] ||
  die "our library '$ours' is missing or unreadable (was it built?)"
"$OBJDUMP" --version 2>/dev/null | grep -q 'GNU objdump' ||
  die "'$OBJDUMP' is not GNU objdump; its -T output format is what this script parses"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One "VERSION NAME TYPE" line per defined dynamic symbol, sorted.
# objdump -T lines look like
#   0000000000010dd0 g    DF .text\t00000000000000a5 (IBVERBS_1.0) ibv_ack_async_event
#   0000000000000000 g    DO *ABS*\t0000000000000000  RDMACM_1.0  RDMACM_1.0
# i.e. address, a fixed 7-character flag field whose last two characters are
# the type (DF/DO/D ), then section, size, version and name.
extract() {
  local lib=$1 out=$2 raw
  raw="$tmp/raw"
  "$OBJDUMP" -T "$lib" >"$raw" || die "objdump -T failed on '$lib'"
  awk '
    match($0, /^[0-9a-f]+ /) {
      flags = substr($0, RLENGTH + 1, 7)
      n = split(substr($0, RLENGTH + 9), f, /[ \t]+/)
      # f[1] may be empty when the rest starts with blanks; normalise.
      if (f[1] == "") { for (i = 1; i < n; i++) f[i] = f[i + 1]; n-- }
      section = f[1]
      if (section == "*UND*") next
      if (n >= 4) { version = f[3]; name = f[4] }
      else        { version = "-";  name = f[3] }   # library without versioning
      type = substr(flags, 6, 2); gsub(/ /, "", type)
      if (type == "") type = "-"
      print version, name, type
    }' "$raw" | LC_ALL=C sort >"$out"
}

extract "$ours" "$tmp/ours"
if ((list_only)); then
  cat "$tmp/ours"
  exit 0
fi
extract "$system" "$tmp/system"

status=0
n_ours=$(wc -l <"$tmp/ours")
n_system=$(wc -l <"$tmp/system")
echo "compare_symbols: $ours: $n_ours defined symbols; $system: $n_system defined symbols"

if ((n_system == 0)); then
  echo "compare_symbols: FAIL: the system library exports no defined symbols" >&2
  status=1
fi

if ! diff -u --label "system: $system" --label "ours: $ours" "$tmp/system" "$tmp/ours"; then
  echo "compare_symbols: FAIL: dynamic symbol tables differ" \
       "('-' only in the system library, '+' only in ours)" >&2
  status=1
fi

# Symbols of a version, not counting the version definition's own entry.
count_version() {
  awk -v v="$1" '$1 == v && $2 != v { n++ } END { print n + 0 }' "$2"
}

for spec in "${expects[@]}"; do
  [[ $spec == *=* ]] || die "bad --expect '$spec' (want VERSION=COUNT)"
  version=${spec%=*}
  want=${spec##*=}
  [[ $want =~ ^[0-9]+$ ]] || die "bad count in --expect '$spec'"
  for which in ours system; do
    got=$(count_version "$version" "$tmp/$which")
    if ((got != want)); then
      echo "compare_symbols: FAIL: $which has $got '$version' symbols, expected $want" >&2
      status=1
    else
      echo "compare_symbols: $which has $got '$version' symbols, as expected"
    fi
  done
done

if ((status == 0)); then
  echo "compare_symbols: OK: identical dynamic symbol tables"
fi
exit "$status"
