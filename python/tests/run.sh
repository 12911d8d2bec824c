#!/bin/sh
# run.sh - make check's entry to the Python package's tests (pytest). SKIPs
# (77) when the package was not built (no shared library, no Python) or when
# numpy or pytest are missing; the backend's cases skip without torch.
py=${PYTHON3:-/usr/bin/python3}
b=${LOOM_BUILDDIR:-.}
s=${LOOM_SRCDIR:-.}
if [ ! -f "$b/python/loom/_paths.py" ]; then
    echo "SKIP: the loom Python package was not built (see configure's summary)"; exit 77
fi
if ! "$py" -c 'import numpy, pytest' 2>/dev/null; then
    echo "SKIP: $py lacks numpy or pytest (apt-get install python3-numpy python3-pytest)"
    exit 77
fi
export PYTHONPATH="$b/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
cd "$s/python/tests" || exit 1
exec "$py" -m pytest -q -p no:cacheprovider --durations=5 test_loom.py test_torch_backend.py
