"""The differential truth test's fixture project, its edits and its plans (the oracle is `fresh_check`).

`tests/broker/test_truth.py` drives Beam through seeded random edits and operations on the `truth` project and
holds each of its verdicts against a fresh batch check of the same disk state (`fresh_check.Oracle`).

- `MODULES`: the `truth` fixture (tests/fixtures/truth) as slots with variants. Variant 0 of every slot is the
  fixture's text; the others rename a definition, break a proof, change a type, add or remove a theorem, or add
  an import, so that a change upstream gives real errors downstream (unknown identifiers, type mismatches, a
  name clash across the diamond `Base <- Left, Right <- Top <- Tip`).
- `build_fixture`: a copy of the project with every module built, as after a `lake build`.
- `plan`: a seeded sequence of `Step`s (edits on disk and Beam operations) that depends on nothing but the seed;
  `edited`, `probe_step`, `references_step` build steps by hand.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from pathlib import Path

from .fresh_check import utf16_len
from .projects import FIXTURES, copy_project, lake_build
from .toolchain import Toolchain

FIXTURE = "truth"
BUILD_LIB = ".lake/build/lib/lean"
"""Where Lake (and the test stand-in) puts a project's oleans, relative to its root."""
PROBE_PREFIX = "probeOnly"
"""Every name a probe declares starts with this; no answer but that probe's own may contain it."""
MIRROR_MARK = "_beamProbe"
"""Probe mirrors' file names contain this; no answer may name one."""


# ---- the fixture as slots -----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Variant:
    """One text of a slot (`""`: the slot is absent), with a short name for step descriptions."""

    name: str
    text: str


@dataclasses.dataclass(frozen=True)
class Slot:
    """A part of a module: a header or one declaration. `variants[0]` is the fixture's text."""

    name: str
    variants: tuple[Variant, ...]


@dataclasses.dataclass(frozen=True)
class Module:
    """A module of the fixture: its path under the root and its slots, in file order."""

    path: str
    slots: tuple[Slot, ...]

    @property
    def name(self) -> str:
        """The Lean module name (`Truth.Base`)."""
        return self.path.removesuffix(".lean").replace("/", ".")


def _slot(name: str, *variants: tuple[str, str]) -> Slot:
    return Slot(name, tuple(Variant(n, t) for n, t in variants))


_BASE_DOC = "/-! The base of the truth fixture: there are no Init oleans, so everything is defined here. -/\n"

MODULES: tuple[Module, ...] = (
    Module(
        "Truth/Base.lean",
        (
            _slot("header", ("fixture", "prelude\n" + _BASE_DOC)),
            _slot(
                "types",
                (
                    "fixture",
                    # Prop-valued inductives with fields need `lcErased` from Init, which is absent: none here.
                    "inductive TNat where\n  | zero\n  | succ (n : TNat)\n\n"
                    "inductive TPair where\n  | mk (a b : TNat)\n\n"
                    "inductive TTrue : Prop where\n  | intro\n\n"
                    "inductive TFact : Prop where\n  | intro\n",
                ),
            ),
            _slot(
                "one",
                ("fixture", "def one : TNat := TNat.succ TNat.zero\n"),
                ("renamed", "def uno : TNat := TNat.succ TNat.zero\n"),
                ("retyped", "def one : TPair := TPair.mk TNat.zero TNat.zero\n"),
            ),
            _slot(
                "baseTrue",
                ("fixture", "theorem baseTrue : TTrue := TTrue.intro\n"),
                ("broken", "theorem baseTrue : TTrue := TFact.intro\n"),
                ("renamed", "theorem baseOk : TTrue := TTrue.intro\n"),
            ),
            _slot("extra", ("absent", ""), ("added", "theorem baseExtra : TFact := TFact.intro\n")),
        ),
    ),
    Module(
        "Truth/Left.lean",
        (
            _slot("header", ("fixture", "prelude\nimport Truth.Base\n")),
            _slot(
                "two",
                ("fixture", "def two : TNat := TNat.succ one\n"),
                ("retyped", "def two : TPair := TPair.mk one one\n"),
                ("broken", "def two : TNat := TNat.succ baseTrue\n"),
            ),
            _slot(
                "leftTrue",
                ("fixture", "theorem leftTrue : TTrue := baseTrue\n"),
                ("broken", "theorem leftTrue : TTrue := TFact.intro\n"),
                ("removed", ""),
            ),
            _slot("clash", ("absent", ""), ("added", "def clash : TNat := one\n")),
        ),
    ),
    Module(
        "Truth/Right.lean",
        (
            _slot("header", ("fixture", "prelude\nimport Truth.Base\n")),
            _slot(
                "twice",
                ("fixture", "def twice (n : TNat) : TNat := TNat.succ (TNat.succ n)\n"),
                ("retyped", "def twice (n : TNat) : TPair := TPair.mk n n\n"),
                ("renamed", "def double (n : TNat) : TNat := TNat.succ (TNat.succ n)\n"),
            ),
            _slot(
                "rightFact",
                ("fixture", "theorem rightFact : TFact := TFact.intro\n"),
                ("broken", "theorem rightFact : TFact := baseTrue\n"),
                ("removed", ""),
            ),
            # Theorems of the same name and statement import side by side; definitions clash.
            _slot("clash", ("absent", ""), ("added", "def clash : TNat := TNat.zero\n")),
        ),
    ),
    Module(
        "Truth/Top.lean",
        (
            _slot("header", ("fixture", "prelude\nimport Truth.Left\nimport Truth.Right\n")),
            _slot(
                "three",
                ("fixture", "def three : TNat := TNat.succ two\n"),
                ("broken", "def three : TNat := TNat.succ leftTrue\n"),
            ),
            _slot(
                "four",
                ("fixture", "def four : TNat := twice two\n"),
                ("retyped", "def four : TPair := TPair.mk two two\n"),
            ),
            _slot(
                "topTrue",
                ("fixture", "theorem topTrue : TTrue := leftTrue\n"),
                ("viaBase", "theorem topTrue : TTrue := baseTrue\n"),
                ("broken", "theorem topTrue : TTrue := rightFact\n"),
            ),
            _slot("extra", ("absent", ""), ("added", "theorem topExtra : TFact := baseExtra\n")),
        ),
    ),
    Module(
        "Truth/Tip.lean",
        (
            _slot(
                "header",
                ("fixture", "prelude\nimport Truth.Top\n"),
                ("moreImports", "prelude\nimport Truth.Top\nimport Truth.Right\n"),
                ("nameBelow", "prelude\nimport\n  Truth.Top\n"),  # one import to Lean: its name on the next line
            ),
            _slot(
                "five",
                # The comment's two characters outside the BMP make UTF-16 columns differ from Lean's code points.
                ("fixture", "/- \U0001d538\U0001d539 -/ def five : TNat := TNat.succ four\n"),
                ("viaTwice", "/- \U0001d538\U0001d539 -/ def five : TNat := twice (twice one)\n"),
                ("broken", "/- \U0001d538\U0001d539 -/ def five : TNat := TNat.succ tipTrue\n"),
            ),
            _slot(
                "tipTrue",
                ("fixture", "theorem tipTrue : TTrue := topTrue\n"),
                ("viaRight", "theorem tipTrue : TFact := rightFact\n"),
                ("broken", "theorem tipTrue : TTrue := rightFact\n"),
            ),
        ),
    ),
)
BY_PATH: Mapping[str, Module] = {m.path: m for m in MODULES}

Choice = tuple[int, ...]
"""The variant chosen for each slot of a module."""


def fixture_state() -> dict[str, Choice]:
    """Every module at its fixture text."""
    return {m.path: (0,) * len(m.slots) for m in MODULES}


def render(module: Module, choice: Choice) -> str:
    """A module's text for a choice of variants: the header, then each present declaration after a blank line."""
    texts = [slot.variants[i].text for slot, i in zip(module.slots, choice, strict=True)]
    header, decls = texts[0], [t for t in texts[1:] if t]
    return "\n".join([header, *decls])


def write_state(root: Path, state: Mapping[str, Choice]) -> None:
    """Write every module whose text differs from the disk (plain file writes: never through Beam)."""
    for path, choice in state.items():
        target = root / path
        text = render(BY_PATH[path], choice)
        if target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")


def copy_fixture(dest: Path) -> Path:
    """A copy of the `truth` fixture at `dest` (which must not exist); returns its resolved path."""
    return copy_project(FIXTURE, dest)


def build_fixture(toolchain: Toolchain, dest: Path) -> Path:
    """A copy of the `truth` fixture at `dest` with every module built by Lake (as after a `lake build`).

    Raises:
        RuntimeError: The build failed.
    """
    root = copy_fixture(dest)
    result = lake_build(toolchain, root, *(m.name for m in MODULES))
    if result.returncode != 0:
        raise RuntimeError(f"lake build of the truth fixture failed:\n{result.stdout}{result.stderr}")
    return root


# ---- the plan: seeded steps -----------------------------------------------------------------------------
EDIT = "edit"
REVERT = "revert"
UPDATE = "update"
SYNC = "sync"
SAVE = "save"
REFRESH = "refresh"
CLOSE = "close"
PROBE = "probe"
SYMBOLS = "symbols"
REFERENCES = "references"

WEIGHTS = {
    # How often each kind of step is drawn: edits and syncs most, so stale imports meet their importers often.
    EDIT: 30,
    REVERT: 5,
    UPDATE: 5,
    SYNC: 25,
    SAVE: 8,
    REFRESH: 7,
    CLOSE: 5,
    PROBE: 8,
    SYMBOLS: 4,
    REFERENCES: 3,
}
_PROBES = (
    "theorem {name} : TTrue := baseTrue",
    "def {name} : TNat := TNat.succ one",
    "theorem {name} : TFact := TFact.intro",
)
_REFERENCE_TARGETS = ("baseTrue", "one", "two", "twice", "topTrue")
"""Names whose references are asked for (at their first occurrence in a module that has them)."""


@dataclasses.dataclass(frozen=True)
class Step:
    """One step of a plan.

    `kind` is one of the constants above. An edit or revert carries the full new `choice` of its module's
    variants; sync, refresh and save the diagnostic `scope`; a probe its `text` (declaring `name`) and the
    `line` it runs after; symbols its `query`; references the `name` asked about and its position.
    """

    kind: str
    path: str = ""
    choice: Choice = ()
    scope: str = "errors"
    text: str = ""
    name: str = ""
    query: str = ""
    line: int = 0
    character: int = 0

    def describe(self) -> str:
        """One line a person can read (and replay by hand)."""
        if self.kind in (EDIT, REVERT):
            module = BY_PATH[self.path]
            named = [f"{s.name}={s.variants[i].name}" for s, i in zip(module.slots, self.choice, strict=True) if i]
            return f"{self.kind} {self.path} on disk -> {' '.join(named) or 'the fixture text'}"
        if self.kind in (SYNC, REFRESH, SAVE):
            return f"{self.kind} {self.path} (diagnostic_scope={self.scope})"
        if self.kind == PROBE:
            return f"run_at {self.path} {self.line}:0 (after its last declaration): {self.text!r}"
        if self.kind == SYMBOLS:
            return f"workspace_symbols {self.query!r}"
        if self.kind == REFERENCES:
            return f"references {self.path} {self.line}:{self.character} ({self.name})"
        return f"{self.kind} {self.path}"


def plan(seed: int, steps: int) -> list[Step]:
    """The steps of a run: a function of `seed` and `steps` only, never of what Beam answers.

    Each step draws the same random numbers whatever `steps` is, so `plan(seed, k)` is the first `k` steps of
    `plan(seed, n)` for every `k <= n`: a run that fails at step `k` fails the same way with `steps=k`.
    """
    rng = random.Random(seed)
    state = fixture_state()
    kinds = list(WEIGHTS)
    weights = [WEIGHTS[k] for k in kinds]
    paths = [m.path for m in MODULES]
    out: list[Step] = []
    probes = 0
    for _ in range(steps):
        kind = rng.choices(kinds, weights)[0]
        path = rng.choice(paths)
        module = BY_PATH[path]
        text = render(module, state[path])
        scope = rng.choice(("errors", "all"))
        if kind == EDIT:
            editable = [i for i, s in enumerate(module.slots) if len(s.variants) > 1]
            k = rng.choice(editable)
            choice = list(state[path])
            choice[k] = rng.choice([i for i in range(len(module.slots[k].variants)) if i != choice[k]])
            state[path] = tuple(choice)
            out.append(Step(EDIT, path, choice=state[path]))
        elif kind == REVERT:
            state[path] = (0,) * len(module.slots)
            out.append(Step(REVERT, path, choice=state[path]))
        elif kind in (SYNC, REFRESH, SAVE):
            out.append(Step(kind, path, scope=scope))
        elif kind == PROBE:
            probes += 1
            name = f"{PROBE_PREFIX}{probes}"
            probe = rng.choice(_PROBES).format(name=name)
            out.append(Step(PROBE, path, text=probe, name=name, line=last_line(text)))
        elif kind == SYMBOLS:
            out.append(Step(SYMBOLS, query=rng.choice((PROBE_PREFIX, f"{PROBE_PREFIX}{max(probes, 1)}", "True"))))
        elif kind == REFERENCES:
            name = rng.choice(_REFERENCE_TARGETS)
            at = name_position(text, name)
            if at is None:  # not in this module as it is now: just read it
                out.append(Step(UPDATE, path))
            else:
                out.append(Step(REFERENCES, path, name=name, line=at[0], character=at[1]))
        else:
            out.append(Step(kind, path))
    return out


def edited(path: str, **variants: str) -> Step:
    """An edit putting `path` at its fixture text except for the named variants (`edited(BASE, one="renamed")`)."""
    module = BY_PATH[path]
    choice = tuple(
        [v.name for v in slot.variants].index(variants.pop(slot.name)) if slot.name in variants else 0
        for slot in module.slots
    )
    if variants:
        raise ValueError(f"{path} has no slots {sorted(variants)}")
    return Step(EDIT, path, choice=choice)


def probe_step(path: str, name: str) -> Step:
    """A probe declaring `name` after the last declaration of `path`'s fixture text."""
    text = render(BY_PATH[path], fixture_state()[path])
    return Step(PROBE, path, text=f"theorem {name} : TTrue := baseTrue", name=name, line=last_line(text))


def references_step(path: str, name: str) -> Step:
    """References of `name` at its first occurrence in `path`'s fixture text."""
    at = name_position(render(BY_PATH[path], fixture_state()[path]), name)
    if at is None:
        raise ValueError(f"{name} is not in {path}")
    return Step(REFERENCES, path, name=name, line=at[0], character=at[1])


def name_position(text: str, name: str) -> tuple[int, int] | None:
    """The LSP position (line, UTF-16 character) of the first whole-word occurrence of `name`, or None."""
    for line_no, line in enumerate(text.split("\n")):
        start = 0
        while (at := line.find(name, start)) >= 0:
            end = at + len(name)
            before = line[at - 1] if at else " "
            after = line[end] if end < len(line) else " "
            if not (before.isalnum() or before in "_.'") and not (after.isalnum() or after in "_'."):
                return line_no, utf16_len(line[:at])
            start = end
    return None


def last_line(text: str) -> int:
    """The 0-based line of the last non-blank line (a probe placed there runs after the last declaration)."""
    lines = text.split("\n")
    return max(i for i, line in enumerate(lines) if line.strip())


def fixture_texts() -> dict[str, str]:
    """The fixture project's module files as they are in tests/fixtures/truth."""
    root = FIXTURES / FIXTURE
    return {m.path: (root / m.path).read_text(encoding="utf-8") for m in MODULES}
