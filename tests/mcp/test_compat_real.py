"""`lean-beam-mcp --tools lean-lsp-mcp` on real Lean, through the official MCP SDK client: the parity session.

The client is configured exactly as lean-lsp-mcp's README shows (`LEAN_PROJECT_PATH` in the server's
environment, the toolchain on PATH), with only the command changed; it runs the scripted session
(`tests/support/compat_session.py`) and Beam's live answers are compared with lean-lsp-mcp 0.32.0's answers
recorded from a real run of the same session (`compat_peer_session.json`; `tox -e peers` runs the peer live and
re-records it with `-- --record`). Every remaining difference is listed in `compat_session.DIFFERENCES` (and in
docs/mcp-clients.md) with its reason.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import anyio
import jsonschema  # type: ignore[import-untyped]
import pytest

from beam_mcp._compat import descriptors
from mcp import Client, StdioServerParameters
from tests.support import compat_session as cs
from tests.support.toolchain import Toolchain

from .support import harness

pytestmark = [pytest.mark.anyio, pytest.mark.lean]


def _params(config: dict[str, object], toolchain: Toolchain) -> StdioServerParameters:
    """Start the configured server as an MCP client does: its command on PATH, its env over the client's own."""
    server = config["mcpServers"]["lean-lsp"]  # type: ignore[index]
    command = shutil.which(server["command"], path=str(Path(sys.executable).parent)) or server["command"]
    env = {**toolchain.env(), **server["env"]}
    return StdioServerParameters(command=command, args=server["args"], env=env, cwd=os.getcwd())


async def test_a_client_configured_as_lean_lsp_mcps_readme_runs_the_session_with_the_peers_answers(
    lean_toolchain: Toolchain, demo_root: Path
) -> None:
    cs.add_files(demo_root)
    config = cs.switched(cs.README_CONFIG, demo_root)
    schemas = {d["name"]: d["outputSchema"] for d in descriptors()}
    async with Client(_params(config, lean_toolchain), mode="legacy") as client:
        listed = await client.list_tools()
        assert [t.name for t in listed.tools] == [d["name"] for d in descriptors()]
        answers = await cs.run_session(client, demo_root)
    for entry in answers:
        assert entry["is_error"] is False, entry
        jsonschema.validate(entry["structured"], schemas[entry["tool"]])
    beam = cs.normalise(answers, demo_root)
    assert cs.mismatches(beam, cs.load_peer()) == []


async def test_lean_goal_at_a_column_answers_lean_s_goals_at_that_column(
    lean_toolchain: Toolchain, demo_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "prelude\nimport Demo.Basic\n\ntheorem y (p : Prop) (hp : p) : p := by skip\n"
    (demo_root / "Demo" / "AtBy.lean").write_text(text, encoding="utf-8")
    monkeypatch.setenv("LEAN_PROJECT_PATH", str(demo_root))
    column = text.splitlines()[3].index(" by ") + 2  # 1-based: the `b` of `by`, where Lean's plainGoal has the goal
    async with harness(lean_cmd=lean_toolchain.server_cmd(), env=lean_toolchain.env(), tools="lean-lsp-mcp") as h:
        with anyio.fail_after(120):
            response, _ = await h.call("lean_goal", {"file_path": "Demo/AtBy.lean", "line": 4, "column": column})
    answer = response["result"]["structuredContent"]
    assert (answer["status"], answer["goals"]) == ("goals", ["p : Prop\nhp : p\n⊢ p"]), answer


async def test_lean_verify_checks_the_fully_qualified_name_it_was_given(
    lean_toolchain: Toolchain, demo_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `t` is `_root_.t`, which uses an axiom; the file ends inside `namespace X`, where `t` alone would mean `X.t`.
    text = (
        "prelude\nimport Demo.Basic\n\naxiom ax : MyTrue\ntheorem t : MyTrue := ax\n\n"
        "namespace X\ntheorem t : MyTrue := myTrue\n"
    )
    (demo_root / "Demo" / "Qualified.lean").write_text(text, encoding="utf-8")
    monkeypatch.setenv("LEAN_PROJECT_PATH", str(demo_root))
    async with harness(lean_cmd=lean_toolchain.server_cmd(), env=lean_toolchain.env(), tools="lean-lsp-mcp") as h:
        with anyio.fail_after(120):
            response, _ = await h.call("lean_verify", {"file_path": "Demo/Qualified.lean", "theorem_name": "t"})
            inner, _ = await h.call("lean_verify", {"file_path": "Demo/Qualified.lean", "theorem_name": "X.t"})
    answer = response["result"]["structuredContent"]
    assert (answer["axioms"], answer["trust"]) == (["ax"], "custom"), answer  # lean-lsp-mcp asks `_root_.t`
    assert inner["result"]["structuredContent"]["axioms"] == []


async def test_positions_past_the_end_of_the_file_answer_as_the_peer(
    lean_toolchain: Toolchain, demo_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # lean-lsp-mcp 0.32.0 on the same Lean (run side by side): Lean answers nothing there, so hover has no
    # information and the others are empty. Beam refused with the broker's 0-based "line 98 is out of range".
    monkeypatch.setenv("LEAN_PROJECT_PATH", str(demo_root))
    at = {"file_path": "Demo/Proofs.lean", "line": 99, "column": 1}
    async with harness(lean_cmd=lean_toolchain.server_cmd(), env=lean_toolchain.env(), tools="lean-lsp-mcp") as h:
        with anyio.fail_after(120):
            answers = {tool: (await h.call(tool, at))[0]["result"] for tool in _PAST_END}
    for tool, expected in _PAST_END.items():
        answer = answers[tool]
        got = answer["content"][0]["text"] if answer["isError"] else answer["structuredContent"]
        assert got == expected, tool


_PAST_END: dict[str, object] = {
    "lean_hover_info": "Error executing tool lean_hover_info: No hover information at line 99, column 1",
    "lean_completions": {"items": []},
    "lean_references": {"items": [], "total": 0},
    "lean_get_widgets": {"widgets": []},
}


async def test_run_code_whose_import_fails_reports_lean_s_error_alone_as_the_peer(
    lean_toolchain: Toolchain, demo_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Lean stops at a header it cannot import; lean-lsp-mcp reports its error and `success: false`. Beam added the
    # broker's own "Lean did not finish elaborating the text" as a second error item at 1:1.
    monkeypatch.setenv("LEAN_PROJECT_PATH", str(demo_root))
    async with harness(lean_cmd=lean_toolchain.server_cmd(), env=lean_toolchain.env(), tools="lean-lsp-mcp") as h:
        with anyio.fail_after(120):
            await h.call("lean_file_outline", {"file_path": "Demo/Proofs.lean"})  # the project becomes known
            response, _ = await h.call("lean_run_code", {"code": "import Nope\n#check 1"})
    answer = response["result"]["structuredContent"]
    assert answer["success"] is False
    assert [(d["line"], d["message"].split("\n")[0]) for d in answer["diagnostics"]] == [
        (1, "unknown module prefix 'Init'")
    ]
