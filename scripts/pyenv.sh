#!/usr/bin/env bash
# Makes sure the git-ignored .venv holds every package of scripts/test-requirements.txt, at the
# pinned versions, and prints the path of its Python. Tests find it as <repo>/.venv/bin/python3
# (or QUEUEBOX_TEST_PYTHON). Installs only what is missing, so a warm run costs one pip check.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
requirements="$root/scripts/test-requirements.txt"

if [ ! -x "$venv/bin/python3" ]; then
    python3 -m venv "$venv" >&2
fi
# `pip install -r` with pinned versions is a no-op when all are present; --quiet keeps the
# output to real problems.
if ! "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" >&2; then
    echo "pyenv: the packages of scripts/test-requirements.txt could not be installed" >&2
    exit 1
fi
echo "$venv/bin/python3"
