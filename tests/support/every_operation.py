"""Valid arguments for every registry operation on the demo project (real lane), after a mix of probes.

`PROBES` are the speculative calls a session makes first: a theorem that exists only in a probe, a private
declaration printed with its full name (Lean names a mirror's module there), handles, attempts, axioms, a
profile and a scratch run. `CALLS` then gives, for each operation name (`OperationSpec.name`, every one in the
registry: a test checks that), a function of what earlier answers said (`Demo`) returning that call's arguments
without `workspace`. Its order is the run order: read-only calls while the probes' mirrors are open, handles
used before they are released, the documents saved and closed near the end, the drop last.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROOFS = "Demo/Proofs.lean"
GOALS = "Demo/Goals.lean"
TODO = "Demo/Todo.lean"
DOTTED = "Demo/Dotted.lean"
PROBE_ONLY = "theorem probeOnly : MyTrue := myTrue"
"""A declaration that exists only in a probe: no answer may locate it."""
PRIVATE = "private def q : MyNat := MyNat.zero\nset_option pp.privateNames true in\n#print q"
"""Lean prints the private name with its module: a mirror's (`«external:…_beamProbe1.lean»`) in a probe."""
SCRATCH = f"prelude\nimport Demo.Basic\n{PRIVATE}\n"
TODO_TEXT = (
    "prelude\nimport Demo.Basic\n\n-- sorry in a comment\ntheorem a (p : Prop) (hp : p) : p := by\n  sorry\n\n"
    "def h : MyNat := _\n\ntheorem unusedVar (p : Prop) (hp : p) : MyTrue :=\n  (fun (x : p) => myTrue) hp\n"
)
DOTTED_TEXT = "prelude\nimport Demo.Basic\n\ndef probe := MyNat.\n"
END = 8
"""The last line of `Demo/Proofs.lean` (`def two ...`): a command probe there runs after the whole file."""


def write_files(root: Path) -> None:
    """Add the files the calls need to a copy of the demo project."""
    (root / TODO).write_text(TODO_TEXT, encoding="utf-8")
    (root / DOTTED).write_text(DOTTED_TEXT, encoding="utf-8")


@dataclasses.dataclass
class Demo:
    """What later calls need from earlier answers: document versions, unused handles, the last `todo`."""

    versions: dict[str, int] = dataclasses.field(default_factory=dict)
    handles: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    answers: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

    def note(self, name: str, arguments: dict[str, Any], answer: dict[str, Any]) -> None:
        """Remember what an answer says that later calls use."""
        if isinstance(answer.get("version"), int) and isinstance(arguments.get("path"), str):
            self.versions[arguments["path"]] = answer["version"]
        if isinstance(answer.get("next_handle"), dict):
            self.handles.append(answer["next_handle"])
        self.answers[name] = answer

    def at(self, path: str, line: int, character: int, **more: Any) -> dict[str, Any]:
        """Arguments for a position of the document's current version."""
        return {"path": path, "version": self.versions[path], "line": line, "character": character, **more}

    def doc(self, path: str, **more: Any) -> dict[str, Any]:
        """Arguments for the document's current version."""
        return {"path": path, "version": self.versions[path], **more}

    def code_action(self) -> dict[str, Any]:
        """A code action the last `todo` listed."""
        items = self.answers["todo"]["items"]
        action: dict[str, Any] = next(item["code_action"] for item in items if item["kind"] == "code_action")
        return action


Arguments = Callable[[Demo], dict[str, Any]]

PROBES: list[tuple[str, Arguments]] = [
    ("sync", lambda d: {"path": PROOFS}),
    ("sync", lambda d: {"path": GOALS}),
    ("update", lambda d: {"path": TODO}),
    ("update", lambda d: {"path": DOTTED}),
    ("run_at", lambda d: d.at(PROOFS, END, 0, text=PROBE_ONLY)),
    ("run_at", lambda d: d.at(PROOFS, END, 0, text=PRIVATE)),
    ("run_at_handle", lambda d: d.at(PROOFS, END, 0, text="def probeDef : MyNat := MyNat.one")),
    ("run_at_handle", lambda d: d.at(PROOFS, 3, 0, text="def spareDef : MyNat := MyNat.one")),
    ("attempts", lambda d: d.at(PROOFS, END, 0, texts=["theorem probeA : MyTrue := byTerm", PRIVATE])),
    ("axioms", lambda d: d.doc(PROOFS, name="byTerm")),
    ("profile", lambda d: d.at(PROOFS, 5, 0)),
    ("run_code", lambda d: {"text": SCRATCH}),
]

REFUSED = frozenset({"widget_source"})
"""Operations Lean refuses here (the prelude fixtures define no widget, so no hash is known): their errors are
checked like answers."""
CALLS: dict[str, Arguments] = {
    "run_at": lambda d: d.at(PROOFS, END, 0, text=PRIVATE),
    "run_at_handle": lambda d: d.at(PROOFS, END, 0, text="def tableDef : MyNat := MyNat.one"),
    "run_with": lambda d: {"path": PROOFS, "handle": d.handles[0], "text": "#check probeDef"},
    "run_with_linear": lambda d: {"path": PROOFS, "handle": d.handles.pop(0), "text": "#check probeDef"},
    "release": lambda d: {"path": PROOFS, "handle": d.handles.pop(0)},
    "attempts": lambda d: d.at(PROOFS, END, 0, texts=[PROBE_ONLY, PRIVATE], handles=True),
    "axioms": lambda d: d.at(PROOFS, 3, 0),
    "profile": lambda d: d.at(PROOFS, 3, 0),
    "run_code": lambda d: {"text": SCRATCH},
    "hover": lambda d: d.at(PROOFS, 3, 29),
    "signature_help": lambda d: d.at(PROOFS, 3, 29),
    "definition": lambda d: d.at(PROOFS, 3, 29),
    "references": lambda d: d.at(PROOFS, 3, 29, include_declaration=True),
    "document_symbols": lambda d: d.doc(PROOFS),
    "workspace_symbols": lambda d: {"query": "byTerm"},  # every mirror of Demo/Proofs.lean holds a copy
    "goals": lambda d: d.at(GOALS, 4, 2, mode="before"),
    "todo": lambda d: d.doc(TODO, start_line=0, start_character=0, end_line=11, end_character=0),
    "code_action_resolve": lambda d: d.doc(TODO, code_action=d.code_action()),
    "completions": lambda d: d.at(DOTTED, 3, 19),
    "outline": lambda d: d.doc(PROOFS),
    "term_goal": lambda d: d.at(PROOFS, 3, 29),
    "widgets": lambda d: d.at(PROOFS, 3, 29),
    "widget_source": lambda d: d.doc(PROOFS, javascript_hash="0"),
    "interactive_diagnostics": lambda d: d.doc(PROOFS),
    "update": lambda d: {"path": PROOFS},
    "sync": lambda d: {"path": PROOFS, "diagnostics_in_result": True, "diagnostic_scope": "all"},
    "refresh": lambda d: {"path": PROOFS, "diagnostics_in_result": True, "diagnostic_scope": "all"},
    "close_save": lambda d: {"path": PROOFS},
    "save": lambda d: {"path": "Demo/Basic.lean"},  # after Proofs is closed: a new Basic would make it stale
    "close": lambda d: {"path": GOALS},
    "drop_workspace": lambda d: {},
}
