#!/usr/bin/env bash
# Install edge_hf as a systemd service on a Jetson (JetPack 6 on Orin first; see README).
#   sudo deploy/install-jetson.sh [--model models/fall-real-....onnx] [--wheels DIR]
# Keeps JetPack's GStreamer-enabled OpenCV (venv with --system-site-packages, no pip OpenCV),
# installs NVIDIA's torch and onnxruntime-gpu wheels from --wheels (or the Jetson AI Lab index),
# creates the edge-hf user, /etc/edge-hf/config.yaml, /var/lib/edge-hf, and the unit.
set -euo pipefail

PREFIX=/opt/edge-hf
CONF=/etc/edge-hf
MODEL=""
WHEELS=""
INDEX_URL="${EDGE_HF_JETSON_INDEX:-https://pypi.jetson-ai-lab.io/jp6/cu126}"
while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL="$2"; shift 2 ;;
    --wheels) WHEELS="$2"; shift 2 ;;
    --prefix) PREFIX="$2"; shift 2 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "install-jetson.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "install-jetson.sh: run as root (sudo)" >&2; exit 2; }
SRC="$(cd "$(dirname "$0")/.." && pwd)"

echo "== JetPack"
if [ -f /etc/nv_tegra_release ]; then head -1 /etc/nv_tegra_release; else
  echo "warning: /etc/nv_tegra_release not found: not a Jetson? continuing" >&2; fi
python3 -c 'import sys; assert sys.version_info >= (3, 10), "edge_hf needs Python >= 3.10 (JetPack 6)"' \
  || { echo "install-jetson.sh: JetPack 5 ships Python 3.8: see README, 'Deploy on Jetson'" >&2; exit 2; }
python3 -c 'import cv2; i = cv2.getBuildInformation(); assert "GStreamer:                   YES" in i' \
  2>/dev/null || echo "warning: system OpenCV without GStreamer: CSI cameras will not open" >&2

echo "== user and directories"
id edge-hf >/dev/null 2>&1 || useradd --system --home-dir /var/lib/edge-hf --shell /usr/sbin/nologin \
  --groups video,render edge-hf
install -d -m 0755 "$PREFIX" "$CONF"
install -d -o edge-hf -g edge-hf -m 0750 /var/lib/edge-hf

echo "== Python environment (keeps JetPack's cv2)"
python3 -m venv --system-site-packages "$PREFIX/venv"
PIP="$PREFIX/venv/bin/pip"
"$PIP" install -q --upgrade pip
if [ -n "$WHEELS" ]; then
  "$PIP" install -q --no-index --find-links "$WHEELS" torch onnxruntime-gpu
else
  "$PIP" install -q --index-url "$INDEX_URL" torch onnxruntime-gpu
fi
# No extras: pip's opencv-python would shadow JetPack's GStreamer build.
"$PIP" install -q "$SRC"
cp "$SRC/README.md" "$PREFIX/README.md"

echo "== model and config"
if [ -z "$MODEL" ]; then MODEL="$(ls "$SRC"/models/fall-real-*.onnx 2>/dev/null | head -1 || true)"; fi
[ -z "$MODEL" ] && MODEL="$SRC/models/fall-synth-mobilenet_v3_small-t3.onnx"
install -o edge-hf -g edge-hf -m 0640 "$MODEL" /var/lib/edge-hf/model.onnx
if [ ! -f "$CONF/config.yaml" ]; then
  install -m 0640 -g edge-hf "$SRC/deploy/examples/usb-camera.yaml" "$CONF/config.yaml"
  echo "wrote $CONF/config.yaml from deploy/examples/usb-camera.yaml: edit cameras and mqtt"
fi
[ -f "$CONF/mqtt-password" ] || install -m 0600 /dev/null "$CONF/mqtt-password"

echo "== systemd"
install -m 0644 "$SRC/systemd/edge-hf.service" /etc/systemd/system/edge-hf.service
sed -i "s#/opt/edge-hf#$PREFIX#g" /etc/systemd/system/edge-hf.service
systemctl daemon-reload
"$PREFIX/venv/bin/edge-hf" check --config "$CONF/config.yaml" \
  && systemctl enable --now edge-hf.service \
  || echo "fix $CONF/config.yaml, then: sudo systemctl enable --now edge-hf" >&2
echo "done: journalctl -u edge-hf -f   |   systemctl status edge-hf"
