#!/usr/bin/env bash
# Runs a program with Debian's librspreload.so preloaded after whatever is
# preloaded already (the ASan runtime in sanitizer jobs must stay first).
#   with_rspreload.sh PROGRAM [ARGS...]
preload=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
export LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD }$preload"
exec "$@"
