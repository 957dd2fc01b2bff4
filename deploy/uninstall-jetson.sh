#!/usr/bin/env bash
# Remove the edge_hf service. Keeps /etc/edge-hf and /var/lib/edge-hf unless --purge.
set -euo pipefail
PURGE=0
[ "${1:-}" = "--purge" ] && PURGE=1
[ "$(id -u)" = 0 ] || { echo "uninstall-jetson.sh: run as root (sudo)" >&2; exit 2; }
systemctl disable --now edge-hf.service 2>/dev/null || true
rm -rf /etc/systemd/system/edge-hf.service /etc/systemd/system/edge-hf.service.d
systemctl daemon-reload
rm -rf /opt/edge-hf
if [ "$PURGE" = 1 ]; then
  rm -rf /etc/edge-hf /var/lib/edge-hf /var/cache/edge-hf
  userdel edge-hf 2>/dev/null || true
  echo "removed edge_hf, its config, state and user"
else
  echo "removed edge_hf; kept /etc/edge-hf and /var/lib/edge-hf (use --purge to delete them)"
fi
