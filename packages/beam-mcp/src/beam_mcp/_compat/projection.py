"""lean-lsp-mcp's tools as projections of Beam's broker operations.

Each tool method turns lean-lsp-mcp's arguments (a `file_path`, 1-based lines, code-point columns) into calls of
registry operations through `Broker.call` (`goals`, `hover`, `attempts`, `run_code`, `axioms`, ... at the version
Beam reported last for the file; `update`/`sync` when it has not seen the file, or the operation says the file
changed), and Beam's answers into lean-lsp-mcp's output shapes (`_text`). It never
talks to Lean itself and holds no Lean rule: what Lean says comes from the broker, what the agent sees is
lean-lsp-mcp's presentation of it. The state a drop-in needs lives here, per server, and nowhere in the broker:
the current project root, and the last document version Beam reported for each file (the broker's contract stays
stateless: every call names its workspace and version).
"""

from __future__ import annotations

from ._core import Ctx, Doc, Outdated
from ._doc_tools import DocTools
from ._probe_tools import ProbeTools
from ._project_tools import ProjectTools

__all__ = ["Ctx", "Doc", "Outdated", "Projection"]


class Projection(DocTools, ProbeTools, ProjectTools):
    """lean-lsp-mcp 0.32.0's tools over Beam's operations, with the per-server state a drop-in needs (`Base`).

    One family of tools per module: documents (`DocTools`), Lean runs on text (`ProbeTools`), the project and the
    web services (`ProjectTools`).
    """
