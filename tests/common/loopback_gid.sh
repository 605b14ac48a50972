#!/usr/bin/env bash
# Prints the index of ::ffff:127.0.0.1 in the GID table, as ibv_devinfo shows it.
ibv_devinfo -v | sed -nE 's/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]+::ffff:127\.0\.0\.1,.*/\1/p' | head -1 | grep -E '^[0-9]+$'
