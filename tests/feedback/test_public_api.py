"""The public API is exactly ``beam_feedback.__all__``."""

from __future__ import annotations

import beam_feedback


def test_every_name_in_all_resolves() -> None:
    for name in beam_feedback.__all__:
        assert getattr(beam_feedback, name) is not None, name


def test_all_has_no_duplicates() -> None:
    assert len(beam_feedback.__all__) == len(set(beam_feedback.__all__))


def test_every_public_module_level_name_is_listed() -> None:
    exported = {name for name in vars(beam_feedback) if not name.startswith("_")}
    submodules = {"collect", "errors", "models", "report", "cli"}
    assert exported - submodules - {"annotations"} == set(beam_feedback.__all__) - {"__version__"}


def test_the_version_matches_the_about_module() -> None:
    from beam_feedback.__about__ import __version__

    assert beam_feedback.__version__ == __version__
