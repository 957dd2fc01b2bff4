"""The command line: sub-commands answer, and a user's mistake is one line with exit code 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from edge_hf.cli import main


def test_window_suggestion_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["window", "--action-s", "1.2", "--interval-ms", "100"]) == 0
    assert capsys.readouterr().out.startswith("T=5 ")


def test_user_error_is_one_line_exit_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "edge_hf.cli", "window", "--action-s", "-1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "action_s" in lines[0] and "Traceback" not in proc.stderr


def test_an_unusable_output_path_is_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    proc = subprocess.run(
        [sys.executable, "-m", "edge_hf.cli", "synth", "--out", str(blocker / "out"), "--clips", "1"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("edge-hf synth: error: ")
    assert str(blocker / "out") in proc.stderr
