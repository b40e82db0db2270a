"""The fenced blocks of the README and docs/ marked runnable, which `tests/test_docs.py` runs so they cannot rot.

A block is runnable when the line right above its opening fence is `<!-- runnable -->` (or `<!-- runnable: KIND
-->`); the comment does not show on GitHub. What running means depends on the fence's language and the kind:

- `console`: the `$ ` lines are commands, run in order in one bash session; each must exit 0, unless the next
  is `echo $?` (which prints its status). The lines below a command are what it prints on a terminal, compared
  with its stdout and its `lean-beam: ` error lines (`lean-beam` runs with `--human`, as on a terminal; `...` in
  a line stands for any text; a `beam: ` line is a note on stderr, not compared). A command with no lines below
  it is not compared.
- `sh`: the block is a bash script, run with `set -e`.
- `json`, `toml`: MCP client configurations; each server in them is started as the client would, and must answer.
- kind `install`: a `sh` block that installs the packages from a checkout; the `standalone` lane runs it in a
  copy of `packages/` (`python tests/support/doc_blocks.py install README.md` prints it).

Paths in blocks are the reader's: `/path/to/beam` is the checkout, `/path/to/your/lean/project` a Lean project.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- runnable(?::\s*(?P<kind>[a-z-]+))?\s*-->$")
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[a-z]*)\s*$")
KINDS = frozenset({"console", "sh", "json", "toml", "install"})


@dataclasses.dataclass(frozen=True)
class Block:
    """One runnable fenced block.

    Attributes:
        path: The Markdown file, relative to the repository root.
        line: The 1-based line of its opening fence.
        kind: What running it means (`console`, `sh`, `json`, `toml` or `install`).
        text: The block's text, without the fences.
    """

    path: str
    line: int
    kind: str
    text: str

    @property
    def id(self) -> str:
        """A test id: `README.md:42`."""
        return f"{self.path}:{self.line}"

    def commands(self) -> list[str]:
        """The commands of a `console` block (the `$ ` lines, without the prompt)."""
        return [command for command, _ in self.samples()]

    def samples(self) -> list[tuple[str, list[str]]]:
        """Each command of a `console` block with the lines the page shows below it (its sample output)."""
        samples: list[tuple[str, list[str]]] = []
        for line in self.text.splitlines():
            if line.startswith("$ "):
                samples.append((line[2:], []))
            elif samples:
                samples[-1][1].append(line)
        return samples


def runnable_blocks(markdown: Path) -> list[Block]:
    """Every block of `markdown` marked runnable, in order.

    Raises:
        ValueError: A marker is not right above a fence, or names a kind with no runner.
    """
    lines = markdown.read_text(encoding="utf-8").splitlines()
    rel = markdown.resolve().relative_to(ROOT).as_posix()
    blocks: list[Block] = []
    for n, line in enumerate(lines):
        marker = MARKER.match(line.strip())
        if marker is None:
            continue
        fence = FENCE.match(lines[n + 1]) if n + 1 < len(lines) else None
        if fence is None:
            raise ValueError(f"{rel}:{n + 1}: a runnable marker must be right above a fenced block")
        kind = marker.group("kind") or fence.group("lang")
        if kind not in KINDS:
            raise ValueError(f"{rel}:{n + 1}: no runner for {kind!r} blocks (known: {', '.join(sorted(KINDS))})")
        end = next(i for i in range(n + 2, len(lines)) if lines[i].strip() == "```")
        text = "\n".join(row.removeprefix(fence.group("indent")) for row in lines[n + 2 : end])
        blocks.append(Block(rel, n + 2, kind, text + "\n"))
    return blocks


def documents() -> list[Path]:
    """The README and every page of docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


if __name__ == "__main__":  # pragma: no cover - the standalone lane's way to read the install block
    kind, page = sys.argv[1], Path(sys.argv[2])
    chosen = [block for block in runnable_blocks(page.resolve()) if block.kind == kind]
    if not chosen:
        sys.exit(f"{page}: no runnable {kind} block")
    print("".join(block.text for block in chosen), end="")
