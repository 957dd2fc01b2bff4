#!/usr/bin/env bash
# Install edge_hf as a systemd service on a Jetson with JetPack 6.0, 6.1 or 6.2 (see README,
# "Deploy on Jetson"):
#   sudo deploy/install-jetson.sh [--model FILE] [--wheels DIR] [--index-url URL] [--prefix DIR]
# Reads the L4T release to pick NVIDIA's torch / onnxruntime-gpu wheels for its CUDA (or takes
# them from --wheels), keeps JetPack's GStreamer OpenCV (venv with --system-site-packages, numpy
# held below 2 for it), then checks cv2 + GStreamer with the venv's own Python. Creates the
# edge-hf user, /etc/edge-hf/config.yaml, /var/lib/edge-hf, the unit and its device list.
set -euo pipefail

ROOT="${EDGE_HF_ROOT:-}" # a fake root for every path read or written (the tests use one)
PREFIX=/opt/edge-hf
CONF=/etc/edge-hf
MODEL=""
WHEELS=""
INDEX_URL="${EDGE_HF_JETSON_INDEX:-}"
die() {
  echo "install-jetson.sh: $*" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL="$2"; shift 2 ;;
    --wheels) WHEELS="$2"; shift 2 ;;
    --index-url) INDEX_URL="$2"; shift 2 ;;
    --prefix) PREFIX="$2"; shift 2 ;;
    -h | --help) sed -n '2,9p' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[ "$(id -u)" = 0 ] || die "run as root (sudo)"
SRC="$(cd "$(dirname "$0")/.." && pwd)"

echo "== JetPack"
# JetPack -> L4T -> CUDA / TensorRT -> the Jetson AI Lab wheel index (README has the table).
REL="$ROOT/etc/nv_tegra_release"
[ -f "$REL" ] || die "$REL not found: this is not a Jetson (on a PC: pip install '.[cpu]', see README)"
LINE="$(head -1 "$REL")"
L4T_MAJOR="$(sed -n 's/^# R\([0-9][0-9]*\) (release), REVISION: \([0-9][0-9]*\)\.\([0-9][0-9]*\).*/\1/p' <<<"$LINE")"
L4T_MINOR="$(sed -n 's/^# R\([0-9][0-9]*\) (release), REVISION: \([0-9][0-9]*\)\.\([0-9][0-9]*\).*/\2.\3/p' <<<"$LINE")"
[ -n "$L4T_MAJOR" ] || die "$REL: cannot read the L4T release from '$LINE'"
L4T="$L4T_MAJOR.$L4T_MINOR"
KNOWN=yes
case "$L4T" in
  36.2.* | 36.3.*) JETPACK=6.0; CUDA=12.2; TENSORRT=8.6; INDEX=https://pypi.jetson-ai-lab.io/jp6/cu122 ;;
  36.4.0 | 36.4.1 | 36.4.2) JETPACK=6.1; CUDA=12.6; TENSORRT=10.3; INDEX=https://pypi.jetson-ai-lab.io/jp6/cu126 ;;
  36.4.*) JETPACK=6.2; CUDA=12.6; TENSORRT=10.3; INDEX=https://pypi.jetson-ai-lab.io/jp6/cu126 ;;
  35.*) die "L4T R$L4T is JetPack 5 (Python 3.8, CUDA 11.4): edge_hf needs JetPack 6; see README, 'Deploy on Jetson'" ;;
  *) KNOWN=no ;;
esac
if [ "$KNOWN" = no ]; then
  [ -n "$INDEX_URL$WHEELS" ] || die "L4T R$L4T is not a JetPack this script knows (6.0-6.2): pass --index-url or --wheels for its CUDA"
  JETPACK="? (L4T R$L4T)"; CUDA="?"; TENSORRT="?"; INDEX=""
fi
INDEX="${INDEX_URL:-$INDEX}"
echo "JetPack $JETPACK (L4T R$L4T): CUDA $CUDA, TensorRT $TENSORRT; wheels from ${WHEELS:-$INDEX}"

echo "== system packages"
# Ubuntu ships venv and pip apart from python3; JetPack's OpenCV (with GStreamer) stays as it is.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv python3-pip >/dev/null \
  || die "apt-get could not install python3-venv and python3-pip (network? run 'sudo apt-get update')"
python3 -c 'import sys; assert sys.version_info >= (3, 10)' \
  || die "edge_hf needs Python >= 3.10 (JetPack 6 has 3.10)"

echo "== user and directories"
id edge-hf >/dev/null 2>&1 || useradd --system --home-dir /var/lib/edge-hf --shell /usr/sbin/nologin \
  --groups video,render edge-hf
install -d -m 0755 "$ROOT$PREFIX" "$ROOT$CONF"
install -d -o edge-hf -g edge-hf -m 0750 "$ROOT/var/lib/edge-hf"

echo "== Python environment (keeps JetPack's cv2)"
VENV="$ROOT$PREFIX/venv"
python3 -m venv --system-site-packages "$VENV"
PIP="$VENV/bin/pip"
# JetPack's cv2 is built against numpy 1.x: numpy 2 in the venv breaks 'import cv2'
# (_ARRAY_API not found). Every install below keeps numpy below 2.
echo "numpy<2" >"$ROOT$PREFIX/constraints.txt"
export PIP_CONSTRAINT="$ROOT$PREFIX/constraints.txt"
"$PIP" install -q --upgrade pip
if [ -n "$WHEELS" ]; then
  "$PIP" install -q --no-index --find-links "$WHEELS" torch onnxruntime-gpu
else
  "$PIP" install -q --index-url "$INDEX" torch onnxruntime-gpu
fi
# No extras: pip's opencv-python would shadow JetPack's GStreamer build.
"$PIP" install -q "$SRC"
cp "$SRC/README.md" "$ROOT$PREFIX/README.md"

echo "== check: cv2 and GStreamer from the venv's Python"
if ! WHY="$("$VENV/bin/python" - 2>&1 <<'EOF'
import sys
try:
    import numpy
    import cv2
except Exception as exc:  # e.g. numpy 2 against a cv2 built for numpy 1.x
    sys.exit(f"import cv2 fails in the venv ({type(exc).__name__}: {str(exc).splitlines()[0]})")
info = cv2.getBuildInformation()
if not any(l.split(":")[0].strip() == "GStreamer" and "YES" in l for l in info.splitlines()):
    sys.exit(f"the venv's cv2 {cv2.__version__} (from {cv2.__file__}) has no GStreamer")
print(f"cv2 {cv2.__version__} with GStreamer, numpy {numpy.__version__}")
EOF
)"; then
  die "$(tail -1 <<<"$WHY"); JetPack's python3-opencv and numpy<2 are needed (see README, 'Deploy on Jetson')"
fi
echo "$WHY"

echo "== model and config"
if [ -z "$MODEL" ]; then
  for m in "$SRC"/models/fall-real-*.onnx "$SRC/models/fall-synth-mobilenet_v3_small-t3.onnx"; do
    if [ -f "$m" ]; then MODEL="$m"; break; fi
  done
fi
[ -f "$MODEL" ] || die "--model $MODEL: no such file"
install -o edge-hf -g edge-hf -m 0640 "$MODEL" "$ROOT/var/lib/edge-hf/model.onnx"
# The person stage's pose model (MoveNet MultiPose, Apache-2.0: its licence goes with it).
if [ -f "$SRC/models/person-movenet-multipose-lightning.onnx" ]; then
  install -o edge-hf -g edge-hf -m 0640 "$SRC/models/person-movenet-multipose-lightning.onnx" \
    "$ROOT/var/lib/edge-hf/person.onnx"
  install -m 0644 "$SRC/models/LICENSE-movenet-Apache-2.0.txt" "$ROOT$PREFIX/LICENSE-movenet.txt"
fi
# The learned pose head (a small JSON of weights) the example configs point person.head at.
if [ -f "$SRC/models/pose-head.json" ]; then
  install -o edge-hf -g edge-hf -m 0640 "$SRC/models/pose-head.json" "$ROOT/var/lib/edge-hf/pose-head.json"
fi
if [ ! -f "$ROOT$CONF/config.yaml" ]; then
  install -m 0640 -g edge-hf "$SRC/deploy/examples/usb-camera.yaml" "$ROOT$CONF/config.yaml"
  echo "wrote $CONF/config.yaml from deploy/examples/usb-camera.yaml: edit cameras and mqtt"
fi
[ -f "$ROOT$CONF/mqtt-password" ] || install -m 0600 /dev/null "$ROOT$CONF/mqtt-password"

echo "== systemd"
UNIT="$ROOT/etc/systemd/system/edge-hf.service"
install -d -m 0755 "$ROOT/etc/systemd/system/edge-hf.service.d"
install -m 0644 "$SRC/systemd/edge-hf.service" "$UNIT"
sed -i "s#/opt/edge-hf#$PREFIX#g" "$UNIT"
# The unit allows NVIDIA's documented device set; the nodes this board has beyond it (they
# differ between Orin, Xavier and JetPack releases) are added as a drop-in.
DROPIN="$ROOT/etc/systemd/system/edge-hf.service.d/devices.conf"
{
  echo "# Written by install-jetson.sh: NVIDIA device nodes present on this board."
  echo "[Service]"
  for node in "$ROOT"/dev/nvhost-* "$ROOT"/dev/nvgpu/igpu0/* "$ROOT"/dev/nvmap "$ROOT"/dev/nvsciipc \
    "$ROOT"/dev/host1x-fence "$ROOT"/dev/nvidia* "$ROOT"/dev/v4l2-nv* "$ROOT"/dev/nvdla*; do
    [ -e "$node" ] || continue
    echo "DeviceAllow=${node#"$ROOT"} rw"
  done
} >"$DROPIN"
echo "device list: $(grep -c '^DeviceAllow' "$DROPIN") NVIDIA nodes in ${DROPIN#"$ROOT"}"
systemctl daemon-reload
if "$VENV/bin/edge-hf" check --config "$ROOT$CONF/config.yaml"; then
  systemctl enable --now edge-hf.service
else
  echo "fix $CONF/config.yaml, then: sudo systemctl enable --now edge-hf" >&2
fi
echo "done: edge-hf doctor --config $CONF/config.yaml | journalctl -u edge-hf -f"
