"""deploy/install-jetson.sh against a fake root: stubbed apt-get, useradd, systemctl and pip, a
real Python running the install's own cv2 check against a stand-in cv2, and the L4T release
files of JetPack 6.0, 6.1 and 6.2, JetPack 5, and a machine that is not a Jetson."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "deploy" / "install-jetson.sh"

RELEASES = {
    "6.0": "# R36 (release), REVISION: 3.0, GCID: 36191598, BOARD: generic, EABI: aarch64",
    "6.1": "# R36 (release), REVISION: 4.0, GCID: 37537400, BOARD: generic, EABI: aarch64",
    "6.2": "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64",
    "5.1": "# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64",
}

# A stand-in for JetPack's cv2, as the venv's Python would import it.
FAKE_CV2 = {
    "ok": 'def getBuildInformation():\n    return "  GStreamer:                   YES (1.20.3)"\n'
    '__version__ = "4.8.0"\n',
    "numpy2": 'raise ImportError("numpy.core.multiarray failed to import: _ARRAY_API not found")\n',
    "nogst": 'def getBuildInformation():\n    return "  GStreamer:                   NO"\n'
    '__version__ = "4.10.0"\n',
}


def _stub(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _run(
    tmp_path: Path, release: str | None, cv2: str = "ok"
) -> tuple[subprocess.CompletedProcess[str], str, Path]:
    root, bins, log = tmp_path / "root", tmp_path / "bin", tmp_path / "calls.log"
    for d in (root / "etc", root / "dev" / "nvgpu" / "igpu0", bins, tmp_path / "cv2"):
        d.mkdir(parents=True, exist_ok=True)
    if release is not None:
        (root / "etc" / "nv_tegra_release").write_text(RELEASES[release] + "\n")
    for node in ("nvmap", "nvhost-ctrl-gpu", "nvhost-nvjpg", "nvgpu/igpu0/ctrl"):
        (root / "dev" / node).touch()
    (tmp_path / "cv2" / "cv2.py").write_text(FAKE_CV2[cv2])
    (tmp_path / "cv2" / "numpy.py").write_text('__version__ = "1.26.4"\n')
    venv_bin = root / "opt" / "edge-hf" / "venv" / "bin"
    pip = 'echo "pip $* | constraint: $(cat "$PIP_CONSTRAINT")" >> "$STUB_LOG"\n'
    py = f'PYTHONPATH="{tmp_path / "cv2"}" exec "{sys.executable}" "$@"\n'
    edge = 'echo "edge-hf $*" >> "$STUB_LOG"\n'
    _stub(bins / "id", '[ "$1" = "-u" ] && { echo 0; exit 0; }\nexit 1\n')
    for name in ("useradd", "apt-get", "systemctl"):
        _stub(bins / name, f'echo "{name} $*" >> "$STUB_LOG"\n')
    # `install -o/-g edge-hf` needs that user: the stub drops owner and group.
    _stub(
        bins / "install",
        'args=""\nwhile [ $# -gt 0 ]; do case "$1" in -o|-g) shift 2 ;; '
        "*) args=\"$args '$1'\"; shift ;; esac; done\neval exec /usr/bin/install $args\n",
    )
    _stub(
        bins / "python3",
        f'echo "python3 $*" >> "$STUB_LOG"\n'
        f'if [ "$1" = "-m" ] && [ "$2" = venv ]; then\n'
        f'  mkdir -p "{venv_bin}"\n'
        f"  printf '#!/bin/sh\\n%s' '{pip}' > \"{venv_bin}/pip\"\n"
        f"  printf '#!/bin/sh\\n%s' '{py}' > \"{venv_bin}/python\"\n"
        f"  printf '#!/bin/sh\\n%s' '{edge}' > \"{venv_bin}/edge-hf\"\n"
        f'  chmod +x "{venv_bin}"/*; exit 0\nfi\nexec "{sys.executable}" "$@"\n',
    )
    env = {**os.environ, "PATH": f"{bins}:{os.environ['PATH']}", "EDGE_HF_ROOT": str(root),
           "STUB_LOG": str(log)}  # fmt: skip
    env.pop("EDGE_HF_JETSON_INDEX", None)
    r = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    return r, log.read_text() if log.exists() else "", root


@pytest.mark.parametrize(
    ("jetpack", "cuda", "tensorrt", "index"),
    [
        ("6.0", "12.2", "8.6", "jp6/cu122"),
        ("6.1", "12.6", "10.3", "jp6/cu126"),
        ("6.2", "12.6", "10.3", "jp6/cu126"),
    ],
)
def test_install_picks_the_wheels_of_its_jetpack(
    tmp_path: Path, jetpack: str, cuda: str, tensorrt: str, index: str
) -> None:
    r, calls, root = _run(tmp_path, jetpack)
    assert r.returncode == 0, r.stderr
    assert f"JetPack {jetpack} (L4T R36." in r.stdout
    assert f"CUDA {cuda}, TensorRT {tensorrt}" in r.stdout
    assert f"--index-url https://pypi.jetson-ai-lab.io/{index} torch onnxruntime-gpu" in calls
    assert "apt-get install -y -qq python3-venv python3-pip" in calls
    pip_lines = [c for c in calls.splitlines() if c.startswith("pip install")]
    assert pip_lines and all("constraint: numpy<2" in c for c in pip_lines), "numpy held < 2"
    assert "cv2 4.8.0 with GStreamer, numpy 1.26.4" in r.stdout, "checked by the venv's Python"
    unit = (root / "etc/systemd/system/edge-hf.service").read_text()
    assert "ExecStart=/opt/edge-hf/venv/bin/edge-hf run" in unit
    dropin = (root / "etc/systemd/system/edge-hf.service.d/devices.conf").read_text()
    for node in ("/dev/nvmap", "/dev/nvhost-nvjpg", "/dev/nvgpu/igpu0/ctrl"):
        assert f"DeviceAllow={node} rw" in dropin
    assert str(root) not in dropin
    assert "systemctl enable --now edge-hf.service" in calls
    # The person stage's model and its licence are installed where the example config points.
    assert (root / "var/lib/edge-hf/person.onnx").stat().st_size > 1e6
    assert "Apache License" in (root / "opt/edge-hf/LICENSE-movenet.txt").read_text()
    config = (root / "etc/edge-hf/config.yaml").read_text()
    assert "model: /var/lib/edge-hf/person.onnx" in config
    assert "head: /var/lib/edge-hf/pose-head.json" in config
    assert '"mode": "veto"' in (root / "var/lib/edge-hf/pose-head.json").read_text()


@pytest.mark.parametrize(
    ("release", "cv2", "needle"),
    [
        (None, "ok", "nv_tegra_release not found: this is not a Jetson"),
        ("5.1", "ok", "L4T R35.4.1 is JetPack 5"),
        ("6.2", "numpy2", "import cv2 fails in the venv (ImportError: numpy.core.multiarray"),
        ("6.1", "nogst", "the venv's cv2 4.10.0"),
    ],
)
def test_install_refuses_in_one_line_where_it_must_stop(
    tmp_path: Path, release: str | None, cv2: str, needle: str
) -> None:
    r, calls, _ = _run(tmp_path, release, cv2)
    assert r.returncode == 2
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("install-jetson.sh: ") and needle in last, r.stderr
    assert "systemctl enable" not in calls, "nothing enabled after a refusal"
    if release in (None, "5.1"):
        assert "apt-get" not in calls, "refused before touching the system"
