#!/usr/bin/env bash
# ibv_devices, ibv_devinfo and ibv_devinfo -v show the softverbs device, an
# ACTIVE Ethernet port and the RoCEv2 loopback GID, and exit 0.
set -eu
ibv_devices | tee /dev/stderr | grep -q softverbs0
ibv_devinfo | tee /dev/stderr | grep -q "PORT_ACTIVE"
v=$(ibv_devinfo -v)
echo "$v"
grep -q "link_layer:[[:space:]]*Ethernet" <<<"$v"
grep -Eq "GID\[ *[0-9]+\]:[[:space:]]+::ffff:127\.0\.0\.1, RoCE v2" <<<"$v"
grep -Eq "max_qp:[[:space:]]+65536" <<<"$v"
