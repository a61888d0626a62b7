#!/usr/bin/env bash
# Installs what the build needs (scripts/bootstrap.sh), configures and
# builds Sluice into build/. Idempotent: a second run only rebuilds what
# changed.
#
#   scripts/build.sh            # everything, RelWithDebInfo into build/
#   scripts/build.sh quickstart # only the library, the launcher and the example
#   scripts/build.sh sluice     # any targets named: only those and what they need
#   BUILD_DIR=out scripts/build.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
jobs="${JOBS:-2}"

"$root/scripts/bootstrap.sh"
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S "$root" -B "$build_dir" -G Ninja -DSLUICE_WERROR="${SLUICE_WERROR:-ON}"
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build_dir" -j "$jobs" "${targets[@]}"
