"""Evidence bundles: layout, manifest, atomic publishing, locking (mirrors beam_feedback/_bundle.py)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import multiprocessing
import os
import re
import zipfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from beam_feedback import BUNDLE_FAILED, BundleError, FeedbackResult, Redactor, build_report
from beam_feedback import _bundle as bundle_module
from beam_feedback._bundle import LOCK_NAME, write_bundle
from tests.feedback.helpers import minimal_input

NOW = datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone.utc)
SECRET = "tok_0123456789abcdef"
NAME = re.compile(r"^20240506-070809-hover-never-answers-[0-9a-f]{8}$")


def _real(path: str | None, home: Path) -> Path:
    assert path is not None
    return Path(path.replace("~", str(home), 1)) if path.startswith("~") else Path(path)


def _check_manifest(bundle: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    listed = {entry["path"]: entry for entry in manifest["files"]}
    on_disk = {p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file()}
    assert set(listed) == on_disk - {"manifest.json"}
    for path, entry in listed.items():
        data = (bundle / path).read_bytes()
        assert entry["size"] == len(data)
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
    assert manifest["schema"] == "beam.feedback.bundle.v1"
    assert manifest["name"] == bundle.name
    return manifest


def _leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.name.startswith(".") and p.name != LOCK_NAME)


def test_a_dir_bundle_goes_under_the_workspace_and_holds_every_part(
    project: Path, env: dict[str, str], home: Path
) -> None:
    data = minimal_input(
        workspace={"root": str(project)}, bundle="dir", evidence=[{"name": "log.txt", "content": "hello"}]
    )
    result = build_report(data, env=env, now=NOW)
    assert result.zip_path is None
    assert result.bundle_dir is not None
    assert result.bundle_dir.startswith("~/proj/.beam/feedback/")
    bundle = _real(result.bundle_dir, home)
    assert NAME.match(bundle.name)
    assert bundle.parent == project / ".beam" / "feedback"
    manifest = _check_manifest(bundle)
    assert [entry["path"] for entry in manifest["files"]] == [
        "card.md",
        "collected.json",
        "evidence/log.txt",
        "metadata.json",
        "report.json",
    ]
    assert (bundle / "card.md").read_text(encoding="utf-8") == result.markdown
    assert json.loads((bundle / "metadata.json").read_text(encoding="utf-8")) == result.metadata.to_json()
    assert (bundle / "evidence" / "log.txt").read_text(encoding="utf-8") == "hello"
    report = json.loads((bundle / "report.json").read_text(encoding="utf-8"))
    assert report["bundle_dir"] == result.bundle_dir
    assert report["collected"] == json.loads((bundle / "collected.json").read_text(encoding="utf-8"))
    assert _leftovers(bundle.parent) == []


def test_a_zip_bundle_is_the_zip_alone_and_no_lock_file_is_left(project: Path, env: dict[str, str], home: Path) -> None:
    # Finding: `--bundle zip` left the unzipped folder beside the zip, and an empty lock file stayed.
    data = minimal_input(workspace={"root": str(project)}, evidence=[{"name": "log.txt", "content": "hello"}])
    result = build_report({**data, "bundle": "zip"}, env=env, now=NOW)
    assert result.bundle_dir is None
    archive = _real(result.zip_path, home)
    assert [p.name for p in archive.parent.iterdir()] == [archive.name]  # no folder, no lock, no temporaries
    name = archive.name.removesuffix(".zip")
    with zipfile.ZipFile(archive) as opened:
        parts = ("card.md", "collected.json", "evidence/log.txt", "manifest.json", "metadata.json", "report.json")
        assert sorted(opened.namelist()) == [f"{name}/{part}" for part in parts]
        assert opened.read(f"{name}/card.md").decode("utf-8") == result.markdown
        report = json.loads(opened.read(f"{name}/report.json"))
    assert report["zip_path"] == result.zip_path and "bundle_dir" not in report
    directory = build_report({**data, "bundle": "dir"}, env=env, now=NOW)
    assert directory.bundle_dir is not None
    assert LOCK_NAME not in [p.name for p in archive.parent.iterdir()]


def test_an_explicit_output_directory_is_used_and_created(project: Path, env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "reports" / "nested"
    result = build_report(minimal_input(workspace={"root": str(project)}, bundle="dir"), env=env, out_dir=out)
    assert _real(result.bundle_dir, Path()).parent == out
    assert not (project / ".beam").exists()


def test_bundle_paths_are_not_redacted_when_redaction_is_off(project: Path, env: dict[str, str]) -> None:
    result = build_report(minimal_input(workspace={"root": str(project)}, bundle="dir", redact=False), env=env)
    assert result.bundle_dir is not None
    assert result.bundle_dir.startswith(str(project))
    assert Path(result.bundle_dir).is_dir()


def test_everything_written_to_a_bundle_is_redacted(project: Path, env: dict[str, str], home: Path) -> None:
    env["GITHUB_TOKEN"] = SECRET
    (project / "server.log").write_text(f"auth {SECRET}\n", encoding="utf-8")
    data = minimal_input(
        workspace={"root": str(project)},
        bundle="dir",
        title=f"token {SECRET}",
        request={"token": SECRET},
        evidence=[{"name": "server.log", "path": "server.log"}, {"name": "inline.json", "content": [SECRET]}],
    )
    redactor = Redactor.from_sources(env, ["--password", "flag-password-value"], home=True)
    result = build_report(
        data, env=env, redactor=redactor, runtime_stats={"argv": ["--password", "flag-password-value"]}
    )
    bundle = _real(result.bundle_dir, home)
    payloads = [p.read_bytes() for p in bundle.rglob("*") if p.is_file()]
    zipped = build_report(
        {**data, "bundle": "zip"}, env=env, redactor=redactor, runtime_stats={"argv": ["--password", "x"]}
    )
    with zipfile.ZipFile(_real(zipped.zip_path, home)) as archive:
        payloads += [archive.read(name) for name in archive.namelist()]
    for payload in payloads:
        assert SECRET.encode() not in payload
        assert b"flag-password-value" not in payload
        assert str(home).encode() not in payload
    assert (bundle / "evidence" / "server.log").read_text(encoding="utf-8") == "auth [redacted:GITHUB_TOKEN]\n"
    assert "redacted-github-token" in bundle.name


def test_a_confidential_bundle_has_no_evidence_paths_or_project_context(
    project: Path, env: dict[str, str], home: Path
) -> None:
    data = minimal_input(
        workspace={"root": str(project)},
        bundle="dir",
        confidential=True,
        evidence=[{"name": "log.txt", "content": "confidential-evidence"}],
    )
    result = build_report(data, env=env)
    assert result.bundle_dir is not None
    bundle = _real(result.bundle_dir, home)
    assert not (bundle / "evidence").exists()
    report = json.loads((bundle / "report.json").read_text(encoding="utf-8"))
    assert set(report) == {"markdown", "metadata", "collection_warnings", "collected"}
    assert set(report["collected"]) == {"identity", "python", "os"}
    for path in bundle.rglob("*"):
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        assert "proj" not in text
        assert "confidential-evidence" not in text


def test_an_unwritable_output_path_fails_cleanly(project: Path, env: dict[str, str], home: Path) -> None:
    blocker = home / "not-a-dir"
    blocker.write_text("", encoding="utf-8")
    with pytest.raises(BundleError) as caught:
        build_report(minimal_input(workspace={"root": str(project)}, bundle="dir"), env=env, out_dir=blocker / "out")
    assert caught.value.code == BUNDLE_FAILED
    assert "~/not-a-dir/out" in caught.value.message
    assert str(home) not in caught.value.message


def test_an_output_path_that_is_a_file_fails_cleanly(project: Path, env: dict[str, str], home: Path) -> None:
    blocker = home / "file"
    blocker.write_text("", encoding="utf-8")
    with pytest.raises(BundleError):
        build_report(minimal_input(workspace={"root": str(project)}, bundle="zip"), env=env, out_dir=blocker)
    assert blocker.read_text(encoding="utf-8") == ""


# ---- bundles never leave <root>/.beam/feedback -----------------------------------------------------------------
@pytest.mark.parametrize("mode", ["dir", "zip"])
@pytest.mark.parametrize("link", [".beam", ".beam/feedback"])
def test_a_symlinked_bundle_directory_is_refused_and_nothing_is_written_outside(
    project: Path, env: dict[str, str], tmp_path: Path, link: str, mode: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (project / link).parent.mkdir(parents=True, exist_ok=True)
    (project / link).symlink_to(outside, target_is_directory=True)
    with pytest.raises(BundleError) as caught:
        build_report(minimal_input(workspace={"root": str(project)}, bundle=mode), env=env)
    assert caught.value.code == BUNDLE_FAILED
    assert f"refusing to write a bundle: ~/proj/{link} is a symbolic link" in caught.value.message
    assert list(outside.iterdir()) == []


def test_a_bundle_directory_component_that_is_a_file_is_refused(project: Path, env: dict[str, str]) -> None:
    (project / ".beam").write_text("", encoding="utf-8")
    with pytest.raises(BundleError, match=r"~/proj/\.beam is not a directory"):
        build_report(minimal_input(workspace={"root": str(project)}, bundle="dir"), env=env)


@pytest.mark.parametrize("taken", ["b", "b.zip"])
def test_an_existing_symlink_with_the_bundle_name_is_never_written_through(tmp_path: Path, taken: str) -> None:
    root = tmp_path / "root"
    out = root / ".beam" / "feedback"
    out.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (out / taken).symlink_to(outside / "target")  # dangling: a plain exists() would say it is free
    with pytest.raises(BundleError, match="already exists"):
        write_bundle(out, "b", {"card.md": b"x"}, make_zip=True, base=root)
    assert list(outside.iterdir()) == [] and _leftovers(out) == []


def test_a_component_swapped_for_a_symlink_while_writing_does_not_redirect_the_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    manifest = bundle_module._manifest

    def swap_then_manifest(name: str, written: dict[str, bytes]) -> bytes:
        # The output directory is open by now: move it away and put a symlink to elsewhere in its place.
        (root / ".beam").rename(root / ".beam-moved")
        (root / ".beam").symlink_to(outside, target_is_directory=True)
        return manifest(name, written)

    monkeypatch.setattr(bundle_module, "_manifest", swap_then_manifest)
    write_bundle(root / ".beam" / "feedback", "b", {"card.md": b"x"}, make_zip=True, base=root)
    assert list(outside.iterdir()) == []
    moved = root / ".beam-moved" / "feedback"
    assert sorted(p.name for p in moved.iterdir()) == ["b.zip"]
    with zipfile.ZipFile(moved / "b.zip") as archive:
        assert archive.read("b/card.md") == b"x"


def test_an_output_directory_outside_its_base_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="is not inside"):
        write_bundle(tmp_path / "elsewhere", "b", {"card.md": b"x"}, make_zip=False, base=tmp_path / "root")
    with pytest.raises(BundleError, match="not a plain path"):
        write_bundle(tmp_path / "root" / ".." / "x", "b", {}, make_zip=False, base=tmp_path / "root")
    assert not (tmp_path / "elsewhere").exists() and not (tmp_path / "x").exists()


def test_an_explicit_output_directory_may_be_a_symlink_the_caller_chose(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    real = tmp_path / "real-out"
    real.mkdir()
    (tmp_path / "out-link").symlink_to(real, target_is_directory=True)
    data = minimal_input(workspace={"root": str(project)}, bundle="dir")
    result = build_report(data, env=env, out_dir=tmp_path / "out-link")
    assert result.bundle_dir is not None and len([p for p in real.iterdir() if p.name != LOCK_NAME]) == 1


def test_a_held_lock_times_out_and_leaves_nothing_behind(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    held = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)  # another writer publishing: the lock is the directory's own
        with pytest.raises(BundleError, match="waiting for the bundle lock"):
            write_bundle(out, "b", {"card.md": b"x"}, make_zip=True, lock_timeout=0.05)
    finally:
        os.close(held)
    assert list(out.iterdir()) == []
    assert not (out / "b").exists()
    assert not (out / "b.zip").exists()


def test_an_existing_bundle_of_the_same_name_is_never_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first, _ = write_bundle(out, "b", {"card.md": b"first"}, make_zip=False)
    assert first is not None
    with pytest.raises(BundleError, match="already exists"):
        write_bundle(out, "b", {"card.md": b"second"}, make_zip=True)
    assert (first / "card.md").read_bytes() == b"first"
    assert not (out / "b.zip").exists()
    assert _leftovers(out) == []


def _concurrent_writer(barrier: Any, root: str, out: str, index: int, results: Any) -> None:
    barrier.wait(timeout=60)
    data = minimal_input(workspace={"root": root}, bundle="zip", evidence=[{"name": "i.txt", "content": str(index)}])
    result = build_report(data, env={"PATH": "", "HOME": "/nonexistent-home"}, out_dir=out, now=NOW)
    results.put(result.to_json())


def test_concurrent_writers_to_one_directory_each_publish_a_complete_distinct_bundle(
    project: Path, tmp_path: Path
) -> None:
    writers = 6
    out = tmp_path / "shared-out"
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(writers)
    results = context.Queue()
    processes = [
        context.Process(target=_concurrent_writer, args=(barrier, str(project), str(out), i, results))
        for i in range(writers)
    ]
    for process in processes:
        process.start()
    reported = [FeedbackResult.model_validate(results.get(timeout=120)) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    archives = sorted(out.iterdir())
    assert len(archives) == writers and all(p.suffix == ".zip" for p in archives)  # nothing else left
    assert sorted(str(a) for a in archives) == sorted(r.zip_path or "" for r in reported)
    evidence = []
    for archive in archives:
        name = archive.name.removesuffix(".zip")
        assert NAME.match(name)  # same second, same title: only the unique suffix tells them apart
        with zipfile.ZipFile(archive) as opened:
            assert opened.testzip() is None and f"{name}/manifest.json" in opened.namelist()
            evidence.append(opened.read(f"{name}/evidence/i.txt").decode("utf-8"))
    assert sorted(evidence) == [str(i) for i in range(writers)]


def test_a_secret_in_an_evidence_name_never_reaches_a_file_name_or_the_manifest(
    project: Path, env: dict[str, str], home: Path
) -> None:
    # The name becomes `evidence/<name>` on disk, in manifest.json and in the zip: it is text like any other.
    env["GITHUB_TOKEN"] = SECRET
    evidence = [{"name": f"{SECRET}.log", "content": "x"}]
    data = minimal_input(workspace={"root": str(project)}, bundle="dir", evidence=evidence)
    bundle = _real(build_report(data, env=env).bundle_dir, home)
    zipped = _real(build_report({**data, "bundle": "zip"}, env=env).zip_path, home)
    names = [p.relative_to(bundle).as_posix() for p in bundle.rglob("*")]
    with zipfile.ZipFile(zipped) as archive:
        names += archive.namelist()
        manifests = [archive.read(name) for name in archive.namelist() if name.endswith("/manifest.json")]
    assert "evidence/[redacted:GITHUB_TOKEN].log" in names
    assert not [name for name in names if SECRET in name]
    for manifest in [(bundle / "manifest.json").read_bytes(), *manifests]:
        assert SECRET.encode() not in manifest
    _check_manifest(bundle)
