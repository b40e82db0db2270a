"""The `profile` operation: one declaration elaborated with Lean's profiler on, on a probe mirror.

Owns: the mirror text (the source up to the declaration Lean lists at the position, `declaration`, then the
profiler options, then that declaration and nothing after it), and reading what Lean reports for the declaration:
`profiler` messages (`<category> took <time>`: summed per category and per source line), `trace.profiler` trees
(`[class] [seconds] text` nodes: the steps with the most time of their own) and the other messages. Lines are the
source's (the options' lines are mapped away). The source document is never touched; nothing is written to disk.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from typing import Any, Final, cast

from beam_broker import _probe_text as probe
from beam_broker import _verdict as verdict
from beam_broker._call import Call
from beam_lsp import Elaboration, LeanDiagnostic, Position, TextDocument

from . import models as pm
from .declaration import declaration_at
from .run import elaborate

OPTIONS: Final = (
    "set_option profiler true\n"
    "set_option profiler.threshold 0\n"
    "set_option trace.profiler.threshold {threshold}\n"
    "set_option trace.profiler true\n"
)
"""What goes before the declaration: every profiler time, and the trace steps of at least `threshold` ms."""
TEXT_CHARS: Final = 200
"""A step's or line's text is cut to this many characters."""
_TOOK: Final = re.compile(r"\A(?P<category>.+?) took (?P<value>[0-9.]+(?:e[-+]?[0-9]+)?)(?P<unit>ms|s)\Z")
_NODE: Final = re.compile(
    r"\A(?P<indent> *)\[(?P<cls>[^\]\s]+)\] \[(?P<secs>[0-9.]+(?:e[-+]?[0-9]+)?)\] ?(?P<text>.*)\Z"
)
_STATUS: Final = re.compile("\\A(?:\u2705|\u274c|\U0001f4a5)\ufe0f?\\s*")


async def profile(call: Call, inp: pm.ProfileInput) -> pm.ProfileResult:
    """Elaborate the declaration at a position with Lean's profiler on, and read Lean's report."""
    client, doc = await call.checked(inp)
    source = client.document(doc.uri)
    pos = Position(line=inp.line, character=inp.character)
    source.validate(pos)
    options = OPTIONS.format(threshold=inp.threshold_ms)
    async with call.runtime.pool(doc.uri).checkout(probe.declaration_text(source, pos)) as mirror:
        found = await declaration_at(call, client, doc, pos, mirror)
        text = source.text[: found.start] + options + source.text[found.start : found.end] + "\n"
        result = await elaborate(call, client, mirror, text, call.runtime.display(doc.path))
    report = read_report(
        verdict.visible(result.diagnostics),
        TextDocument(mirror.uri, text, 0),
        source,
        _Span(found.start, found.end, len(options)),
    )
    errors = any(message.severity == "error" for message in report.messages)
    return pm.ProfileResult(
        workspace=call.workspace,
        version=doc.version,
        name=found.name,
        range=found.range,
        success=result.elaboration is Elaboration.COMPLETE and not errors,
        total_ms=_ms(sum(report.categories.values())),
        categories=[
            pm.ProfileCategory(category=name, ms=_ms(ms))
            for name, ms in sorted(report.categories.items(), key=lambda item: -item[1])
        ],
        lines=[
            pm.ProfileLine(line=line, ms=_ms(ms), text=source.line_text(line).strip()[:TEXT_CHARS])
            for line, ms in sorted(report.lines.items())
        ],
        slowest=slowest(report.steps, pm.PROFILE_STEPS),
        messages=report.messages,
    )


@dataclasses.dataclass(frozen=True)
class _Span:
    """Where the declaration is: `start`..`end` in the source, after `shift` characters of options in the mirror."""

    start: int
    end: int
    shift: int


@dataclasses.dataclass
class Report:
    """What Lean reported for the declaration, in source lines."""

    categories: dict[str, float] = dataclasses.field(default_factory=dict)
    lines: dict[int, float] = dataclasses.field(default_factory=dict)
    steps: list[pm.ProfileStep] = dataclasses.field(default_factory=list)
    messages: list[pm.RunMessage] = dataclasses.field(default_factory=list)


def read_report(diags: Iterable[LeanDiagnostic], mirror: TextDocument, source: TextDocument, span: _Span) -> Report:
    """Sort the declaration's messages into profiler times, trace steps and the rest (options' messages dropped)."""
    report = Report()
    first, last = span.start + span.shift, span.end + span.shift
    for d in diags:
        offset = mirror.offset_at(d.range.start)
        if not first <= offset <= last:
            continue  # the options' own commands, or the end of the input
        line = source.position_at(offset - span.shift).line
        times = profiler_times(d.message)
        if times:
            for category, ms in times:
                report.categories[category] = report.categories.get(category, 0.0) + ms
                report.lines[line] = report.lines.get(line, 0.0) + ms
        elif (d.severity or 3) >= 3 and _NODE.match(d.message.split("\n", 1)[0]):
            report.steps.extend(trace_steps(d.message, line))
        else:
            severity = cast(Any, probe.run_severity(d))
            report.messages.append(pm.RunMessage(severity=severity, text=d.message, code=verdict.lean_name(d)))
    return report


def profiler_times(message: str) -> list[tuple[str, float]]:
    """`[(category, ms)]` of a `profiler` message (every line `<category> took <n>ms|s`); [] for any other."""
    lines = [line.strip() for line in message.strip().split("\n")]
    found = [_TOOK.match(line) for line in lines]
    if not lines or not all(found):
        return []
    return [
        (match.group("category"), float(match.group("value")) * (1000.0 if match.group("unit") == "s" else 1.0))
        for match in found
        if match is not None
    ]


def trace_steps(message: str, line: int) -> list[pm.ProfileStep]:
    """The nodes of one `trace.profiler` message, in order, each with its time of its own (children not listed).

    A node is a line `[class] [seconds] text` indented two spaces per level; the lines after it that are not nodes
    continue its text (only the first is kept). Lean prefixes the text with the step's status (✅️, ❌️, 💥️), dropped.
    """
    nodes: list[tuple[int, str, float, str]] = []
    for raw in message.split("\n"):
        match = _NODE.match(raw)
        if match is None:
            continue
        text = _STATUS.sub("", match.group("text"), count=1)
        nodes.append((len(match.group("indent")) // 2, match.group("cls"), float(match.group("secs")) * 1000.0, text))
    children = [0.0] * len(nodes)
    open_nodes: list[int] = []  # the path from the root to the node before, by index
    for i, (depth, _, ms, _) in enumerate(nodes):
        while open_nodes and nodes[open_nodes[-1]][0] >= depth:
            open_nodes.pop()
        if open_nodes:
            children[open_nodes[-1]] += ms
        open_nodes.append(i)
    return [
        pm.ProfileStep(
            trace_class=cls,
            ms=_ms(ms),
            self_ms=_ms(max(ms - children[i], 0.0)),
            depth=depth,
            line=line,
            text=text[:TEXT_CHARS],
        )
        for i, (depth, cls, ms, text) in enumerate(nodes)
    ]


def slowest(steps: Sequence[pm.ProfileStep], most: int) -> list[pm.ProfileStep]:
    """The `most` steps with the most time of their own, slowest first (ties keep Lean's order)."""
    return sorted(steps, key=lambda step: -step.self_ms)[:most]


def _ms(value: float) -> float:
    """Milliseconds to the microsecond."""
    return round(value, 3)
