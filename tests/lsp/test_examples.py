"""examples/: the scripts docs/lsp.md and docs/mcp-clients.md show run on the demo and print what the docs say."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mcp.support import server_binary
from tests.support import projects
from tests.support.fixtures import fake_cmd
from tests.support.toolchain import Toolchain

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(example: str, root: Path, server: list[str], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / example), str(root), *server],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_quickstart_runs_against_the_fake_server(tmp_path: Path) -> None:
    root = projects.copy_project("demo", tmp_path / "demo")
    out = run("quickstart.py", root, fake_cmd({"goal": "p : Prop\n⊢ p", "goal_trigger": "skip"}))
    assert out.splitlines()[-1] == "PlainGoal(rendered='```lean\\np : Prop\\n⊢ p\\n```', goals=('p : Prop\\n⊢ p',))"


@pytest.mark.lean
def test_real_quickstart_prints_diagnostics_in_1_based_code_points_and_the_goal(
    lean_toolchain: Toolchain, demo_root: Path
) -> None:
    out = run("quickstart.py", demo_root, lean_toolchain.server_cmd(), lean_toolchain.env())
    lines = out.splitlines()
    assert lines[0] == "Point1(line=5, column=4) unknown tactic"  # no Init: `skip` is no tactic here
    assert lines[1] == "Point1(line=4, column=42) unsolved goals"
    assert lines[-1].startswith("PlainGoal(rendered='```lean\\np : Prop\\nhp : p\\n⊢ p\\n```'")


@pytest.mark.lean
def test_real_tutorial_syncs_asks_goals_probes_and_cancels(lean_toolchain: Toolchain, demo_root: Path) -> None:
    out = run("tutorial.py", demo_root, lean_toolchain.server_cmd(), lean_toolchain.env())
    lines = out.splitlines()
    assert lines[0] == "Proofs.lean v1: complete, 0 diagnostics"
    assert lines[1] == "plain goal: ('p : Prop\\nhp : p\\n⊢ p',)"
    assert lines[2] == "hypotheses: [('p', 'Prop'), ('hp', 'p')] target: p"
    assert lines[3] == "first attempt errors: []"
    assert lines[4].startswith("second attempt errors: ['Type mismatch")
    assert lines[5] == "cancelled: True cancellations sent: 1"
    assert not (demo_root / "Demo/Probe.lean").exists()


@pytest.mark.lean
def test_real_navigation_follows_names_and_applies_a_rename_in_memory(
    lean_toolchain: Toolchain, demo_root: Path
) -> None:
    before = (demo_root / "Demo/Proofs.lean").read_text(encoding="utf-8")
    out = run("navigate.py", demo_root, lean_toolchain.server_cmd(), lean_toolchain.env())
    lines = out.splitlines()
    assert lines[0].startswith("hover: MarkupContent(") and "myTrue : MyTrue" in lines[0]
    assert lines[1] == f"defined in: {(demo_root / 'Demo/Basic.lean').as_uri()}"
    assert lines[2] == "references: [('Proofs.lean', 3), ('Basic.lean', 12)]"
    assert lines[3].startswith("keywords: ") and lines[3].endswith("first at Point1(line=1, column=1)")
    assert lines[4] == "imports: ['Demo.Basic']"
    assert lines[5] == "two uses: ['MyNat', 'MyNat.one', 'MyNat.succ']"
    assert lines[-1] == "theorem idProof2 (p : Prop) (hp : p) : p :="
    assert (demo_root / "Demo/Proofs.lean").read_text(encoding="utf-8") == before  # nothing written


@pytest.mark.lean
def test_real_mcp_sdk_client_syncs_and_hovers_through_the_server(lean_toolchain: Toolchain, demo_root: Path) -> None:
    out = run("mcp_client.py", demo_root, [server_binary()], lean_toolchain.env())
    counts = {"error": 0, "warning": 0, "information": 0, "hint": 0, "unknown": 0, "total": 0}
    assert out.splitlines() == [f"sync: 1 {counts} True", "hover: myTrue : MyTrue"]


def test_every_example_is_tested() -> None:
    source = Path(__file__).read_text(encoding="utf-8")
    assert all(f'"{p.name}"' in source for p in EXAMPLES.glob("*.py")) and shutil.which(sys.executable)
