#!/bin/sh
# tests/compat/run.sh BIN_DIR MODEL — `make compat`: llmd against real clients.
#
# Installs the official openai Python SDK, at one pinned version, into a venv
# (build/compat-venv, reused while its pins hold), then runs the SDK suite and
# the curl suite; each starts its own llmd (tests/compat/harness.py) and stops
# it with SIGTERM, expecting exit status 0.  Exits non-zero on any failure.
# Pins: bump them together, after running the suite against the new versions.
set -eu

OPENAI_VERSION=3.54.0
PINS="openai==$OPENAI_VERSION httpx2==2.16.2 httpcore2==2.16.2"

if [ $# -ne 2 ]; then
    echo "usage: $0 BIN_DIR MODEL" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin_dir=$(cd "$1" && pwd)
model=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
venv=${COMPAT_VENV:-$root/build/compat-venv}

for f in "$bin_dir/llmd" "$bin_dir/llmadmin"; do
    [ -x "$f" ] || { echo "compat: $f is missing (build it first)" >&2; exit 1; }
done
[ -f "$model" ] || { echo "compat: model $model is missing (make model)" >&2; exit 1; }
for tool in curl openssl python3; do
    command -v "$tool" >/dev/null || { echo "compat: $tool is not installed (make deps)" >&2; exit 1; }
done

# A venv that cannot run or holds other versions is rebuilt from scratch.
stamp="$venv/.compat-pins"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$PINS" ] ||
    ! "$venv/bin/python" -c "import openai, sys; sys.exit(openai.__version__ != '$OPENAI_VERSION')" 2>/dev/null; then
    echo "compat: creating $venv with $PINS"
    rm -rf "$venv"
    python3 -m venv "$venv"
    # shellcheck disable=SC2086 # PINS is a list of words
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check $PINS
    echo "$PINS" >"$stamp"
fi

cd "$here"
echo "compat: openai $("$venv/bin/python" -c 'import openai; print(openai.__version__)'), $(curl --version | head -n 1)"
LLMD_BIN_DIR=$bin_dir LLMD_MODEL=$model PYTHONDONTWRITEBYTECODE=1
export LLMD_BIN_DIR LLMD_MODEL PYTHONDONTWRITEBYTECODE
exec "$venv/bin/python" -m unittest -v test_openai test_curl
