"""A change cancelled while it waits to be written must not leave the client's copy ahead of Lean's.

The load lane's wrong answers (docs/deploy.md): `lean_attempts` cancels the slower of two runs of one group of
alternatives (`_probes/attempts.run_all`). A run cancelled inside `LeanClient.change` while another task held the
JSON-RPC write lock (probes on other mirrors write to Lean's stdin all the time) had already replaced the client's
copy of the mirror, but its `didChange` never went out. The next change of that mirror was a range edit computed
against a text Lean never had: Lean spliced it into its older text (`example : MyTrue := load0e : MyTrue := nope`,
"Unknown identifier `load0e`"). The fake lane checks the wire; this one checks Lean's answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_lsp import LeanClient, path_to_uri
from tests.support.toolchain import Toolchain

pytestmark = pytest.mark.anyio

PREFIX = "prelude\nimport Demo.Basic\n\ntheorem load0 : MyTrue := myTrue\n\n"
SHARED = PREFIX + "example : MyTrue := load0\n\nexample : MyTrue := nope\n"
"""What a mirror held after a batch's shared version (alternatives 0 and 1)."""
AGAIN = PREFIX + "theorem again0 : MyTrue := myTrue\n"
"""What the cancelled help run was putting in it (alternative 2 alone)."""
RUN = PREFIX + "example : MyTrue := load0\n"
"""The next probe there (`lean_run_at`): no error."""


@pytest.fixture
async def client(lean_toolchain: Toolchain, demo_root: Path) -> Any:
    async with LeanClient.start(lean_toolchain.server_cmd(), cwd=demo_root, env=lean_toolchain.env()) as c:
        yield c


async def _errors(client: LeanClient, uri: str) -> list[str]:
    return [d.message for d in (await client.sync(uri)).diagnostics if d.is_error]


@pytest.mark.lean
async def test_a_change_cancelled_behind_the_write_lock_still_reaches_lean(client: LeanClient, demo_root: Path) -> None:
    uri = path_to_uri(demo_root / "Demo/Load_beamProbe1.lean")
    with anyio.fail_after(60):
        await client.open(uri, SHARED)
        assert await _errors(client, uri) == ["Unknown identifier `nope`"]
        write_lock = client._rpc._write_lock
        async with anyio.create_task_group() as tg:
            await write_lock.acquire()  # another task is writing to Lean's stdin
            scope = anyio.CancelScope()

            async def cancelled_change() -> None:
                with scope:
                    await client.change(uri, AGAIN, save=False)

            tg.start_soon(cancelled_change)
            await anyio.wait_all_tasks_blocked()  # it waits for the write lock
            scope.cancel()
            await anyio.wait_all_tasks_blocked()
            write_lock.release()
        # Whatever the cancelled call left behind, what Beam believes and what Lean holds agree.
        await client.change(uri, RUN, save=False)
        assert client.document(uri).text == RUN
        assert await _errors(client, uri) == []
