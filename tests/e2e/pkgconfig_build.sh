#!/usr/bin/env bash
# A program builds against softverbs through pkg-config (build tree), and at
# run time it loads our libibverbs.so.1, not the system's.
set -euo pipefail
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/prog.c" <<'C'
#include <infiniband/verbs.h>
#include <stdio.h>
int main(void) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list || n != 1) return 1;
  printf("%s\n", ibv_get_device_name(list[0]));
  ibv_free_device_list(list);
  return 0;
}
C
export PKG_CONFIG_PATH=$build/lib/pkgconfig
cc -o "$work/prog" "$work/prog.c" $(pkg-config --cflags --libs libibverbs)
# ldd's output is taken whole first: `ldd | grep -q` under pipefail fails
# whenever grep exits before ldd has finished writing (SIGPIPE).
libs=$(ldd "$work/prog")
grep -q "libibverbs.so.1 => $build/lib/" <<<"$libs" || { echo "$libs"; exit 1; }
[ "$("$work/prog")" = softverbs0 ]
[[ " $(pkg-config --libs librdmacm) " == *" -lrdmacm "* ]]
