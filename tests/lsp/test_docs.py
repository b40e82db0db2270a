"""The docs of beam-lsp: the API reference is what the docstrings say, and the ten-line script is the example."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _quickstart_code() -> str:
    source = (ROOT / "examples/quickstart.py").read_text(encoding="utf-8")
    return source.split('"""', 2)[2].strip()  # after the module docstring


def _python_blocks(markdown: Path) -> list[str]:
    return [block.strip() for block in re.findall(r"```python\n(.*?)```", markdown.read_text(encoding="utf-8"), re.S)]


def test_the_api_reference_is_what_the_generator_writes() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/gen_lsp_api.py"), "--check"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_the_ten_line_script_of_the_readme_and_the_docs_is_the_tested_example() -> None:
    code = _quickstart_code()
    assert len(code.splitlines()) <= 12
    assert code in _python_blocks(ROOT / "packages/beam-lsp/README.md")
    assert code in _python_blocks(ROOT / "docs/lsp.md")


def test_the_tutorial_s_steps_are_in_the_tested_example() -> None:
    tutorial = (ROOT / "examples/tutorial.py").read_text(encoding="utf-8")
    for line in ("await proofs.open()", "goals.interactive_goals(Point1(5, 3))", "await probe.close()"):
        assert line in tutorial
        assert line in (ROOT / "docs/lsp.md").read_text(encoding="utf-8")
