#!/usr/bin/env bash
# Opt-in check (`make arm64-check`, not in `make test`): the daemon's CPU runtime on 64-bit Arm.
#
# Builds a Debian bookworm arm64 root with debootstrap, runs it through qemu-user-static (Debian
# packages), installs what deploy/install-jetson.sh installs minus JetPack -- PyPI's aarch64
# wheels of onnxruntime, opencv-python-headless and numpy<2, and edge_hf without torch (the CPU
# daemon never imports it) -- then runs `edge-hf check` and `edge-hf replay` of the demo fall
# with the shipped demo model, and compares the events with the same replay on this machine:
# same event ids, types and times, scores within 1e-3.
#
# What it does not cover: JetPack's cv2 (GStreamer, nvarguscamerasrc, hardware decoding), CUDA,
# TensorRT and NVIDIA's torch wheels -- those need a Jetson (README, "Deploy on Jetson").
set -euo pipefail

ROOT=${ARM64_ROOT:-build/arm64-root}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PY=${PYTHON:-.venv/bin/python}
OUT=${ARM64_OUT:-build/arm64-check}
die() { echo "arm64-check: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot); run it as root or with sudo"
[ -x "$PY" ] || die "$PY not found: run 'make venv' first"
if ! command -v debootstrap >/dev/null || ! command -v qemu-aarch64-static >/dev/null; then
  echo "== installing debootstrap, qemu-user-static, binfmt-support (Debian packages)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap qemu-user-static \
    binfmt-support >/dev/null || die "apt-get could not install them (run 'apt-get update' first)"
fi
if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
  mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || die "cannot mount binfmt_misc"
fi
[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || update-binfmts --enable qemu-aarch64 \
  || die "qemu-aarch64 is not registered with binfmt_misc (update-binfmts --enable qemu-aarch64)"

if [ ! -x "$ROOT/usr/bin/python3" ]; then
  echo "== debootstrap: Debian bookworm arm64 into $ROOT (a few minutes, once)"
  rm -rf "$ROOT"
  debootstrap --arch=arm64 --variant=minbase \
    --include=python3,python3-venv,python3-pip,ca-certificates,libgl1,libglib2.0-0 \
    bookworm "$ROOT" "$MIRROR" >/dev/null || die "debootstrap failed (network? mirror $MIRROR)"
fi
[ "$(chroot "$ROOT" uname -m)" = aarch64 ] || die "the root does not run as aarch64"

cleanup() { umount "$ROOT/proc" 2>/dev/null || true; umount "$ROOT/dev" 2>/dev/null || true; }
trap cleanup EXIT
mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
mountpoint -q "$ROOT/dev" || mount --bind /dev "$ROOT/dev"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
# The root trusts what this machine trusts (a proxy's CA in the host's bundle included).
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  mkdir -p "$ROOT/etc/ssl/certs"
  cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
fi

echo "== edge_hf into $ROOT/opt/edge-hf (no torch: the CPU daemon never imports it)"
rm -rf "$ROOT/opt/edge-hf" && mkdir -p "$ROOT/opt/edge-hf/src" "$ROOT/opt/edge-hf/demo"
cp -r pyproject.toml README.md edge_hf "$ROOT/opt/edge-hf/src/"
mkdir -p "$ROOT/opt/edge-hf/src/models"
cp models/fall-synth-mobilenet_v3_small-t3.onnx "$ROOT/opt/edge-hf/src/models/"
chroot "$ROOT" /bin/sh -ec '
  test -x /opt/venv/bin/python || python3 -m venv /opt/venv
  echo "numpy<2" > /opt/constraints.txt
  /opt/venv/bin/pip install -q -c /opt/constraints.txt --only-binary=:all: \
    numpy onnxruntime opencv-python-headless pyyaml "paho-mqtt>=2,<3" "pydantic>=2.5,<3" \
    prometheus-client tqdm
  /opt/venv/bin/pip install -q --no-deps /opt/edge-hf/src
  /opt/venv/bin/python -c "import platform, onnxruntime, cv2, numpy; print(platform.machine(), \"onnxruntime\", onnxruntime.__version__, \"cv2\", cv2.__version__, \"numpy\", numpy.__version__)"
'

echo "== the demo fall, made here, replayed there and here"
mkdir -p "$OUT"
"$PY" -m edge_hf.cli synth --demo --out "$OUT/demo" >/dev/null
cp "$OUT/demo/fall_demo.mp4" "$ROOT/opt/edge-hf/demo/"
cat >"$ROOT/opt/edge-hf/demo.yaml" <<'EOF'
device_id: demo
model: {path: /opt/edge-hf/src/models/fall-synth-mobilenet_v3_small-t3.onnx, providers: [cpu], threshold: 0.75}
cameras: [{name: fall_demo, source: /opt/edge-hf/demo/fall_demo.mp4}]
state_dir: /opt/edge-hf/state
EOF
chroot "$ROOT" /opt/venv/bin/edge-hf check --config /opt/edge-hf/demo.yaml
chroot "$ROOT" /opt/venv/bin/edge-hf replay --config /opt/edge-hf/demo.yaml \
  --state-dir /opt/edge-hf/replay >"$OUT/events-arm64.jsonl"
sed "s#/opt/edge-hf/src/models/#models/#; s#/opt/edge-hf/demo/#$OUT/demo/#; s#/opt/edge-hf/state#$OUT/state#" \
  "$ROOT/opt/edge-hf/demo.yaml" >"$OUT/demo.yaml"
"$PY" -m edge_hf.cli replay --config "$OUT/demo.yaml" --state-dir "$OUT/replay" \
  >"$OUT/events-x86_64.jsonl"
"$PY" - "$OUT/events-arm64.jsonl" "$OUT/events-x86_64.jsonl" <<'EOF'
import json, sys
arm, x86 = ([json.loads(line) for line in open(p)] for p in sys.argv[1:3])
keys = ("event_id", "type", "camera", "started_at", "time")
same = [tuple(e[k] for k in keys) for e in arm] == [tuple(e[k] for k in keys) for e in x86]
close = all(abs(a["peak_score"] - b["peak_score"]) <= 1e-3 for a, b in zip(arm, x86))
print(f"arm64: {[(e['type'], e['started_at'], e['peak_score']) for e in arm]}")
print(f"x86_64: {[(e['type'], e['started_at'], e['peak_score']) for e in x86]}")
if not (arm and same and close):
    sys.exit("arm64-check: FAILED: the events differ")
print("arm64-check: passed: the fall raises the same event on aarch64 as on x86-64")
EOF
