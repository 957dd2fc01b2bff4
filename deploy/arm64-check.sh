#!/usr/bin/env bash
# Opt-in check (`make arm64-check`, not in `make test`): the daemon's CPU runtime on 64-bit Arm.
#
# Builds a Debian bookworm arm64 root with debootstrap, runs it through qemu-user-static (Debian
# packages), installs what deploy/install-jetson.sh installs minus JetPack -- PyPI's aarch64
# wheels of onnxruntime, opencv-python-headless and numpy<2, and edge_hf without torch (the CPU
# daemon never imports it) -- then runs `edge-hf check` and `edge-hf replay` of the demo fall
# with the shipped demo model, and of two real clips (a fall and a walk, ../shared/data/gmdcsa24)
# with the shipped real pipeline (the EfficientNet-Lite0 classifier, the MoveNet person stage and
# the learned pose head, `combined`), and compares the events with the same replays on this
# machine: same event ids, types and times, scores within 2e-3 (onnxruntime's aarch64 kernels
# do not round like x86-64's: the real classifier's scores differ by up to 1e-3).
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
cp models/fall-synth-mobilenet_v3_small-t3.onnx models/fall-real-efficientnet_lite0-t3.onnx \
  models/person-movenet-multipose-lightning.onnx models/pose-head.json "$ROOT/opt/edge-hf/src/models/"
chroot "$ROOT" /bin/sh -ec '
  test -x /opt/venv/bin/python || python3 -m venv /opt/venv
  echo "numpy<2" > /opt/constraints.txt
  /opt/venv/bin/pip install -q -c /opt/constraints.txt --only-binary=:all: \
    numpy onnxruntime opencv-python-headless pyyaml "paho-mqtt>=2,<3" "pydantic>=2.5,<3" \
    prometheus-client tqdm
  /opt/venv/bin/pip install -q --no-deps /opt/edge-hf/src
  /opt/venv/bin/python -c "import platform, onnxruntime, cv2, numpy; print(platform.machine(), \"onnxruntime\", onnxruntime.__version__, \"cv2\", cv2.__version__, \"numpy\", numpy.__version__)"
'

# compare NAME: the events of $OUT/events-NAME-arm64.jsonl against $OUT/events-NAME-x86_64.jsonl
compare() {
  "$PY" - "$1" "$OUT/events-$1-arm64.jsonl" "$OUT/events-$1-x86_64.jsonl" <<'EOF'
import json, sys
name = sys.argv[1]
arm, x86 = ([json.loads(line) for line in open(p)] for p in sys.argv[2:4])
keys = ("event_id", "type", "camera", "started_at", "time")
same = [tuple(e[k] for k in keys) for e in arm] == [tuple(e[k] for k in keys) for e in x86]
close = all(abs(a["peak_score"] - b["peak_score"]) <= 2e-3 for a, b in zip(arm, x86))
for arch, events in (("aarch64", arm), ("x86_64", x86)):
    print(f"{name} {arch}: {[(e['camera'], e['type'], e['started_at'], e['peak_score']) for e in events]}")
if not (arm and same and close):
    sys.exit(f"arm64-check: FAILED: the {name} events differ between aarch64 and x86-64")
EOF
}

# replay NAME CONFIG: `edge-hf check` and `edge-hf replay` of CONFIG (a path in the root) there,
# the same config with its /opt/edge-hf paths mapped to this checkout here; then compare.
replay() {
  local name=$1 config=$2
  chroot "$ROOT" /opt/venv/bin/edge-hf check --config "$config"
  chroot "$ROOT" /opt/venv/bin/edge-hf replay --config "$config" --hold-end-s 3 \
    --state-dir "/opt/edge-hf/replay-$name" >"$OUT/events-$name-arm64.jsonl"
  sed "s#/opt/edge-hf/src/models/#models/#; s#/opt/edge-hf/demo/#$OUT/clips/#; s#/opt/edge-hf/state#$OUT/state#" \
    "$ROOT$config" >"$OUT/$name.yaml"
  "$PY" -m edge_hf.cli replay --config "$OUT/$name.yaml" --hold-end-s 3 \
    --state-dir "$OUT/replay-$name" >"$OUT/events-$name-x86_64.jsonl"
  compare "$name"
}

echo "== the demo fall with the demo model, made here, replayed there and here"
mkdir -p "$OUT/clips"
"$PY" -m edge_hf.cli synth --demo --out "$OUT/demo" >/dev/null
cp "$OUT/demo/fall_demo.mp4" "$OUT/clips/"
cat >"$ROOT/opt/edge-hf/demo.yaml" <<'EOF'
device_id: demo
model: {path: /opt/edge-hf/src/models/fall-synth-mobilenet_v3_small-t3.onnx, providers: [cpu], threshold: 0.75}
cameras: [{name: fall_demo, source: /opt/edge-hf/demo/fall_demo.mp4}]
state_dir: /opt/edge-hf/state
EOF

GMDCSA=${GMDCSA:-../shared/data/gmdcsa24}
REAL=0
if [ -f "$GMDCSA/S3_Fall_01.mp4" ] && [ -f "$GMDCSA/S1_ADL_10.mp4" ]; then
  REAL=1
  cp "$GMDCSA/S3_Fall_01.mp4" "$GMDCSA/S1_ADL_10.mp4" "$OUT/clips/"
  cat >"$ROOT/opt/edge-hf/real.yaml" <<'EOF'
device_id: real
model: {path: /opt/edge-hf/src/models/fall-real-efficientnet_lite0-t3.onnx, providers: [cpu]}
person:
  model: /opt/edge-hf/src/models/person-movenet-multipose-lightning.onnx
  head: /opt/edge-hf/src/models/pose-head.json
  decision: combined
cameras:
  - {name: fall, source: /opt/edge-hf/demo/S3_Fall_01.mp4}
  - {name: walk, source: /opt/edge-hf/demo/S1_ADL_10.mp4}
state_dir: /opt/edge-hf/state
EOF
fi
cp "$OUT"/clips/* "$ROOT/opt/edge-hf/demo/"
replay demo /opt/edge-hf/demo.yaml

if [ "$REAL" = 1 ]; then
  echo "== a real fall and a real walk (GMDCSA24) with the shipped real pipeline, there and here"
  replay real /opt/edge-hf/real.yaml
  grep -q '"camera": "fall".*"type": "start"' "$OUT/events-real-arm64.jsonl" \
    || die "FAILED: the real fall raised no event on aarch64"
  if grep -q '"camera": "walk"' "$OUT/events-real-arm64.jsonl"; then
    die "FAILED: the real walk raised an event on aarch64"
  fi
else
  echo "== $GMDCSA absent: the shipped real pipeline is not checked (GMDCSA=DIR names it)"
fi
echo "arm64-check: passed: the same events on aarch64 as on x86-64"
