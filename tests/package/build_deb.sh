#!/usr/bin/env bash
# The package tests' .deb, built once (CTest fixture softverbs_deb):
#   build_deb.sh BUILD_DIR OUT_DIR
set -u
source "$(cd "$(dirname "$0")" && pwd)/overlay_root.sh"
command -v cpack >/dev/null || { echo "cpack is not installed"; exit 77; }
rm -rf "$2"
mkdir -p "$2" && build_package "$1" "$2"
