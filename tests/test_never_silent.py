"""Never silent (#42): what a user can get wrong in a config, a head file, a camera or a replay is
refused in one line naming the file, key or value, never accepted quietly nor a traceback."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`edge-hf ARGS` with this worktree's code, its address space capped at 3 GB (a config that
    is read without bound then fails fast instead of filling the machine's memory)."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    return subprocess.run(
        [sys.executable, "-m", "edge_hf.cli", *args], capture_output=True, text=True,
        timeout=timeout, preexec_fn=cap, check=False,
    )  # fmt: skip


def _one_line(proc: subprocess.CompletedProcess[str], needle: str) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], proc.stderr[-2000:]
    return lines[0]


# ------------------------------------------------------------------ 21: /dev/zero, a FIFO


def test_check_refuses_a_device_and_a_fifo_as_config_without_reading_them(tmp_path: Path) -> None:
    line = _one_line(_cli("check", "--config", "/dev/zero", timeout=60), "not a regular file")
    assert line.startswith("edge-hf check: error: /dev/zero: a character device")
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)  # nobody writes to it: reading it would block forever
    _one_line(_cli("check", "--config", str(fifo), timeout=60), f"{fifo}: a FIFO, not a regular")
    big = tmp_path / "big.yaml"
    big.write_text("device_id: x\n" + "#" * 2_000_000 + "\n")
    _one_line(_cli("check", "--config", str(big), timeout=60), "bytes; a config is at most")
