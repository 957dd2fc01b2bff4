"""The container option (deploy/container): no base image or Docker daemon here, so the files are
parsed and checked against the repository and each other instead of built."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "deploy" / "container" / "Dockerfile"
COMPOSE = ROOT / "deploy" / "container" / "compose.yaml"
INSTRUCTIONS = {
    "ARG", "FROM", "ENV", "RUN", "WORKDIR", "COPY", "USER", "VOLUME", "EXPOSE", "HEALTHCHECK",
    "ENTRYPOINT", "CMD", "LABEL",
}  # fmt: skip


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        out.append((word, rest.strip()))
    return out


def test_dockerfile_is_well_formed_and_matches_the_repository() -> None:
    ins = _instructions()
    assert {w for w, _ in ins} <= INSTRUCTIONS, "only known instructions, upper case"
    first = next(i for i, (w, _) in enumerate(ins) if w != "ARG")
    assert ins[first][0] == "FROM" and "nvcr.io/nvidia/l4t-jetpack:" in ins[first][1]
    for w, rest in ins:
        if w == "COPY":
            *sources, _dest = rest.split()
            for src in sources:
                assert (ROOT / src).exists(), f"COPY {src}: not in the repository"
    runs = " ".join(rest for w, rest in ins if w == "RUN")
    assert "python3-venv" in runs and "python3-pip" in runs
    assert "numpy<2" in runs and "--system-site-packages" in runs
    assert "opencv-python" not in runs, "pip's OpenCV would shadow the GStreamer build"
    assert "GStreamer" in runs, "the image checks its cv2 has GStreamer"
    user = [rest for w, rest in ins if w == "USER"]
    assert user and user[-1] not in ("root", "0")
    entry = json.loads(next(rest for w, rest in ins if w == "ENTRYPOINT"))
    assert entry == ["/opt/edge-hf/venv/bin/edge-hf"] and "/opt/edge-hf/venv" in runs
    cmd = json.loads(next(rest for w, rest in ins if w == "CMD"))
    assert cmd[:2] == ["run", "--config"]


def test_compose_runs_the_image_with_the_nvidia_runtime_devices_state_and_secret() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    svc = compose["services"]["edge-hf"]
    assert svc["runtime"] == "nvidia"
    build = svc["build"]
    assert (COMPOSE.parent / build["context"] / build["dockerfile"]).resolve() == DOCKERFILE
    assert any(d.startswith("/dev/video") for d in svc["devices"])
    mounts = {v.split(":")[1]: v.split(":")[0] for v in svc["volumes"]}
    cmd = json.loads(next(rest for w, rest in _instructions() if w == "CMD"))
    assert cmd[-1] in mounts, "the config the image runs is the one compose mounts"
    assert mounts["/var/lib/edge-hf"] in compose["volumes"], "state in a named volume"
    assert "mqtt-password" in svc["secrets"] and "mqtt-password" in compose["secrets"]
    assert svc["restart"] == "unless-stopped"


def test_the_image_runs_what_the_cli_accepts_from_the_venv_it_builds() -> None:
    """What the Dockerfile does, not words in it: the entrypoint is the console script of the
    venv a RUN creates and installs edge_hf into, and CMD parses with edge-hf's own parser."""
    from edge_hf.cli import build_parser

    ins = _instructions()
    runs = [rest for w, rest in ins if w == "RUN"]
    (entry,) = json.loads(next(rest for w, rest in ins if w == "ENTRYPOINT"))
    venv = entry.removesuffix("/bin/edge-hf")
    assert any(f"-m venv --system-site-packages {venv}" in r for r in runs), "the venv is made"
    assert any(f"{venv}/bin/pip install /opt/edge-hf" in r for r in runs), "edge_hf goes into it"
    workdir = [rest for w, rest in ins if w == "WORKDIR"]
    copies = [rest.split() for w, rest in ins if w == "COPY"]
    assert workdir and workdir[-1] == "/opt/edge-hf", "the source is copied into /opt/edge-hf"
    assert {"pyproject.toml", "edge_hf"} <= {src for c in copies for src in c[:-1]}
    cmd = json.loads(next(rest for w, rest in ins if w == "CMD"))
    args = build_parser().parse_args(cmd)
    assert args.command == "run" and args.func.__name__ == "run_command"
    state = next(json.loads(rest) for w, rest in ins if w == "VOLUME")
    assert state == ["/var/lib/edge-hf"], "the daemon's default state_dir is a volume"
    users = [rest for w, rest in ins if w == "USER"]
    assert users and users[-1] not in ("root", "0"), "it runs unprivileged"
