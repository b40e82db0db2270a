"""Side by side with lean-lsp-mcp 0.32.0 on real Lean: the same scripted session, field by field (`tox -e peers`).

The pinned peer is installed into a throwaway virtual environment (`BEAM_PEER_VENV=DIR` keeps and reuses one, as
`bench/peers.py` does); both servers run over stdio under the official MCP SDK client on their own copy of the
demo project, with `LEAN_PROJECT_PATH` naming it. Their normalised answers must agree except for the listed
differences (`compat_session.DIFFERENCES`). The peer's answers must also equal the recording the CI test compares
Beam with; `BEAM_RECORD_PEER=1` rewrites that recording instead. Runs only when `BEAM_PEERS=1` (the `peers` tox
lane sets it): it needs the network to install the peer.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcp import Client, StdioServerParameters
from tests.mcp.support import server_binary
from tests.support import compat_session as cs
from tests.support.toolchain import Toolchain

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.lean,
    pytest.mark.skipif(os.environ.get("BEAM_PEERS") != "1", reason="the peers lane (tox -e peers) sets BEAM_PEERS=1"),
]


@pytest.fixture(scope="session")
def peer_exe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `lean-lsp-mcp` executable of a virtual environment holding the pinned peer."""
    venv = Path(os.environ.get("BEAM_PEER_VENV") or tmp_path_factory.mktemp("peer") / "venv")
    exe = venv / "bin" / "lean-lsp-mcp"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", cs.PEER], check=True)
    return exe


async def _answers(params: StdioServerParameters, root: Path) -> list[dict[str, object]]:
    async with Client(params, mode="legacy") as client:
        return cs.normalise(await cs.run_session(client, root), root)


async def test_beam_and_lean_lsp_mcp_answer_the_session_alike(
    lean_toolchain: Toolchain, demo_root: Path, peer_exe: Path, tmp_path: Path
) -> None:
    peer_root = tmp_path / "peer-demo"
    shutil.copytree(demo_root, peer_root, symlinks=True)
    peer_root = peer_root.resolve()
    for root in (demo_root, peer_root):
        cs.add_files(root)
    env = lean_toolchain.env()
    peer = await _answers(
        StdioServerParameters(command=str(peer_exe), env=env | {"LEAN_PROJECT_PATH": str(peer_root)}), peer_root
    )
    beam_cmd = [server_binary(), "--tools", "lean-lsp-mcp", "--lean-cmd", shlex.join(lean_toolchain.server_cmd())]
    beam = await _answers(
        StdioServerParameters(command=beam_cmd[0], args=beam_cmd[1:], env=env | {"LEAN_PROJECT_PATH": str(demo_root)}),
        demo_root,
    )
    if os.environ.get("BEAM_RECORD_PEER") == "1":
        cs.PEER_SESSION.write_text(json.dumps(peer, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert cs.mismatches(beam, peer) == []
    assert peer == cs.load_peer(), "lean-lsp-mcp answers differently from the recording: re-record it"
