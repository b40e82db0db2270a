"""The public API of beam-feedback beyond what `tests/test_layout.py` checks of every package."""

from __future__ import annotations

import beam_feedback


def test_every_public_module_level_name_is_listed() -> None:
    exported = {name for name in vars(beam_feedback) if not name.startswith("_")}
    submodules = {"collect", "errors", "models", "report", "cli"}
    assert exported - submodules - {"annotations"} == set(beam_feedback.__all__) - {"__version__"}


def test_the_version_matches_the_about_module() -> None:
    from beam_feedback.__about__ import __version__

    assert beam_feedback.__version__ == __version__
