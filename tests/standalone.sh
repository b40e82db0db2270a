#!/usr/bin/env bash
# Build each package's wheel, install it alone (with its declared dependencies, and sibling wheels
# only where declared) into a fresh venv, and import it: proves the packaging is self-contained.
set -euo pipefail
work="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
rm -rf "$work/wheels"
mkdir -p "$work/wheels"
for pkg in beam-lsp beam-broker beam-mcp beam-feedback; do
  python -m build --wheel --outdir "$work/wheels" "$root/packages/$pkg" >/dev/null
done
for pkg in beam_lsp beam_broker beam_mcp beam_feedback; do
  venv="$work/venv-$pkg"
  rm -rf "$venv"
  python -m venv "$venv"
  dist=${pkg//_/-}
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --find-links "$work/wheels" "$dist"
  "$venv/bin/python" - "$pkg" <<'PY'
import importlib, importlib.resources, sys
name = sys.argv[1]
mod = importlib.import_module(name)
missing = [n for n in getattr(mod, "__all__", []) if not hasattr(mod, n)]
assert not missing, f"{name}: names in __all__ that do not resolve: {missing}"
assert mod.__version__, name
typed = importlib.resources.files(name).joinpath("py.typed").is_file()
assert typed, f"{name}: py.typed missing from the wheel"
print(f"standalone ok: {name} {mod.__version__}")
PY
  if [ "$pkg" = beam_lsp ]; then
    # The docs' ten-line script (examples/quickstart.py), with the wheel alone, against the scripted fake server
    # (standard library only) on a copy of the demo project.
    project="$work/quickstart-demo"
    rm -rf "$project"
    cp -r "$root/tests/fixtures/demo" "$project"
    out="$("$venv/bin/python" "$root/examples/quickstart.py" "$project" \
      "$venv/bin/python" "$root/tests/support/fake_lean.py" --config '{"goal_trigger": "skip"}')"
    echo "$out"
    case "$out" in
      *"PlainGoal(rendered="*) echo "standalone ok: the quickstart script";;
      *) echo "standalone: the quickstart script printed no goal" >&2; exit 1;;
    esac
  fi
done
# The README's install block (tests/support/doc_blocks.py reads it), run as a reader runs it at the top of a
# checkout (here a copy of packages/), and the three commands it installs.
checkout="$work/readme-checkout"
rm -rf "$checkout"
mkdir -p "$checkout"
cp -r "$root/packages" "$checkout/packages"
python "$root/tests/support/doc_blocks.py" install "$root/README.md" > "$work/readme-install.sh"
(cd "$checkout" && bash -e "$work/readme-install.sh" >/dev/null)
for command in lean-beam lean-beam-mcp beam-feedback; do
  version="$("$checkout/.venv/bin/$command" --version)"
  echo "${version%%$'\n'*}"
done
echo "standalone ok: the README's install block"
