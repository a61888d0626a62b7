#!/bin/sh
# What `cmake --install` puts into the interpreter's site packages imports
# on its own, outside the build tree: installed under a scratch DESTDIR.
#   install_check.sh SCRATCH BUILD_DIR INSTALL_DIR PYTHON
set -eu
scratch="$1" build="$2" site="$3" python="$4"
rm -rf "$scratch"
DESTDIR="$scratch" cmake --install "$build" --component python > /dev/null
cd /
PYTHONPATH="$scratch$site" "$python" - "$scratch" <<'PY'
import sys
import sluice
assert sluice.__file__.startswith(sys.argv[1]), sluice.__file__
assert callable(sluice.connect) and sluice.View and sluice.Client.serve
print("installed and imported from", sluice.__file__)
PY
rm -rf "$scratch"
