"""Input and output models of the operations that check Lean text on probe mirrors.

The `lean_run_at` family (a text at a position, continued from handles, `lean_release`), `lean_attempts`
(alternative texts at one position), `lean_axioms` (`#print axioms` of a declaration), `lean_profile` (one
declaration under Lean's profiler) and `lean_run_code` (a standalone text in a private document). The conventions
are `models`' own (closed strict inputs, frozen replies whose JSON schema is the tool's outputSchema, `workspace`
first); this module only adds these operations' shapes, and `models` holds every other operation's.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from beam_broker.models import (
    CHAR_DESC,
    LINE_DESC,
    PathInput,
    PinnedInput,
    ProofState,
    _In,
    _Out,
    _Reply,
)
from beam_broker.workspace import WorkspaceDescriptor


class RunAtInput(PinnedInput):
    """`lean_run_at`, `lean_run_at_handle`."""

    line: int = Field(description=LINE_DESC, ge=0)
    character: int = Field(description=CHAR_DESC, ge=0)
    text: str = Field(description="Lean tactics or a command to run at the position.")
    workspace: WorkspaceDescriptor


class RunWithInput(PathInput):
    """`lean_run_with`, `lean_run_with_linear`."""

    handle: dict[str, Any] = Field(description="A next_handle, passed back unchanged.")
    text: str = Field(description="Lean text to run from the handle.")
    workspace: WorkspaceDescriptor


class ReleaseInput(PathInput):
    """`lean_release`."""

    handle: dict[str, Any] = Field(description="Opaque handle to release.")
    workspace: WorkspaceDescriptor


class RunMessage(_Out):
    """A message produced by a speculative run."""

    severity: Literal["information", "warning", "error"]
    text: str
    code: str | None = None
    """The name Lean gives the message (`lean.unknownIdentifier`), as in `lean_sync`'s items."""


class RunResult(_Reply):
    """`lean_run_at` family: `proof_state` and `next_handle` are always present (null when absent)."""

    success: bool
    messages: list[RunMessage] = Field(default_factory=list)
    traces: list[str] = Field(default_factory=list)
    proof_state: ProofState | None
    next_handle: dict[str, Any] | None


ATTEMPTS_MAX = 32
"""Most alternative texts one `lean_attempts` call takes."""
PROFILE_THRESHOLD_MS = 10
"""Default `threshold_ms` of `lean_profile` (Lean's own default for `trace.profiler.threshold`)."""
PROFILE_STEPS = 20
"""How many trace steps `lean_profile` returns (those with the most time of their own)."""
STANDARD_AXIOMS = ("propext", "Classical.choice", "Quot.sound")
"""The axioms of Lean's standard library that `lean_axioms` does not count as nonstandard."""
SORRY_AXIOM = "sorryAx"
"""The axiom `sorry` (and Lean's error recovery) elaborates to."""
_NAME_PART = r"(?:«[^«»\r\n]+»|[^\s.«»()\[\]{}:;,#@`\"$]+)"
NAME_PATTERN = rf"^{_NAME_PART}(?:\.{_NAME_PART})*$"
"""One Lean identifier, as `lean_axioms` takes it: it goes into `#print axioms <name>`, so it never holds a space
outside `«»` (which would let a second command follow) nor a character no identifier has."""


class AttemptsInput(PinnedInput):
    """`lean_attempts`."""

    line: int = Field(description=LINE_DESC, ge=0)
    character: int = Field(description=CHAR_DESC, ge=0)
    texts: list[str] = Field(
        min_length=1,
        max_length=ATTEMPTS_MAX,
        description="Alternative Lean texts, each run on its own at the position.",
    )
    workspace: WorkspaceDescriptor
    handles: bool = Field(False, description="Return next_handle for each successful attempt.")


class AxiomsInput(PinnedInput):
    """`lean_axioms`: the declaration at (`line`, `character`), or `name`, or `name` as it resolves there."""

    workspace: WorkspaceDescriptor
    name: str | None = Field(
        None,
        min_length=1,
        max_length=1024,
        pattern=NAME_PATTERN,
        description="Declaration name, resolved after the declaration at line and character, else at the end of "
        "the document.",
    )
    line: int | None = Field(None, ge=0, description=f"{LINE_DESC} With character: a position in the declaration.")
    character: int | None = Field(None, ge=0, description=f"{CHAR_DESC} With line.")

    @model_validator(mode="after")
    def _a_declaration(self) -> AxiomsInput:
        if (self.line is None) != (self.character is None):
            raise ValueError("line and character go together")
        if self.name is None and self.line is None:
            raise ValueError("name, or line and character, is required")
        return self


class ProfileInput(PinnedInput):
    """`lean_profile`."""

    line: int = Field(description=f"{LINE_DESC} A position in the declaration.", ge=0)
    character: int = Field(description=CHAR_DESC, ge=0)
    workspace: WorkspaceDescriptor
    threshold_ms: int = Field(
        PROFILE_THRESHOLD_MS,
        ge=0,
        le=60_000,
        description="Leave out trace steps shorter than this (0 keeps all).",
    )


class RunCodeInput(_In):
    """`lean_run_code`."""

    text: str = Field(
        description="A standalone Lean file's text (it may import the workspace's modules); never written to disk."
    )
    workspace: WorkspaceDescriptor


class Attempt(_Out):
    """One alternative of `lean_attempts`, as `lean_run_at` would answer it (without `workspace`)."""

    success: bool
    messages: list[RunMessage] = Field(default_factory=list)
    traces: list[str] = Field(default_factory=list)
    proof_state: ProofState | None
    next_handle: dict[str, Any] | None


class AttemptsResult(_Reply):
    """`lean_attempts`: one attempt per text, in the order of `texts`; `mode` is where they ran."""

    version: int
    mode: Literal["proof", "command"]
    attempts: list[Attempt]


class AxiomsResult(_Reply):
    """`lean_axioms`: the axioms Lean's `#print axioms` lists (null when it printed no list: see `messages`).

    `name` is the full name Lean printed (`Foo.t1`), or the name probed when Lean printed none.
    """

    version: int
    name: str
    axioms: list[str] | None
    uses_sorry: bool
    nonstandard: list[str]
    messages: list[RunMessage]


class ProfileCategory(_Out):
    """Time Lean's profiler (`set_option profiler true`) accounted to one category, summed."""

    category: str
    ms: float


class ProfileLine(_Out):
    """Profiler time Lean reported at one source line (zero-based) of the declaration, and the line's text."""

    line: int
    ms: float
    text: str


class ProfileStep(_Out):
    """A node of Lean's `trace.profiler` tree: its class, time, time of its own (children not listed), depth."""

    trace_class: str
    ms: float
    self_ms: float
    depth: int
    line: int
    text: str


class ProfileResult(_Reply):
    """`lean_profile`: one declaration elaborated with Lean's profiler on, on a mirror."""

    version: int
    name: str
    range: dict[str, Any]
    success: bool
    total_ms: float
    categories: list[ProfileCategory]
    lines: list[ProfileLine]
    slowest: list[ProfileStep]
    messages: list[RunMessage]


class CodeMessage(_Out):
    """A message Lean reports for a `lean_run_code` text, with its range in that text (LSP coordinates)."""

    severity: Literal["information", "warning", "error"]
    text: str
    range: dict[str, Any]
    code: str | None = None
    """The name Lean gives the message (`lean.unknownIdentifier`), as in `lean_sync`'s items."""


class RunCodeResult(_Reply):
    """`lean_run_code`: `success` when Lean elaborated the text without errors."""

    success: bool
    messages: list[CodeMessage]
