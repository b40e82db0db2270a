#!/usr/bin/env bash
# Run tox with nothing installed beforehand: bootstraps tox into .venv-tox (once), makes every
# pyenv-installed CPython 3.10-3.13 visible to tox's interpreter discovery, then runs `tox "$@"`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv-tox/bin/tox ]; then
  "$PY" -m venv .venv-tox
  .venv-tox/bin/python -m pip install -q --disable-pip-version-check 'tox>=4.20,<5'
fi
if command -v pyenv >/dev/null 2>&1; then
  # tox's interpreter discovery queries shims in a clean environment, where pyenv shims refuse versions that
  # are not selected; putting each installed 3.10-3.13 bin directory on PATH makes them all discoverable.
  proot=$(pyenv root)
  for v in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.1[0-3]\.[0-9]+$' | sort -V); do
    PATH="$proot/versions/$v/bin:$PATH"
  done
  export PATH
fi
exec .venv-tox/bin/tox "$@"
