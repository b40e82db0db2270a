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
  versions=$(pyenv versions --bare 2>/dev/null | grep -E '^3\.(1[0-3])\.[0-9]+$' | sort -V -r | tr '\n' ':' || true)
  if [ -n "$versions" ]; then
    export PYENV_VERSION="$(pyenv version-name 2>/dev/null | cut -d: -f1):${versions%:}"
  fi
fi
exec .venv-tox/bin/tox "$@"
