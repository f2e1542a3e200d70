#!/usr/bin/env bash
# Installs berth from an unpacked release tarball as a systemd service:
#   tar xzf berth_VERSION_linux_ARCH.tar.gz && cd berth_VERSION_linux_ARCH && sudo ./install.sh
# It never overwrites an existing /etc/berth/berth.toml.
set -euo pipefail
cd "$(dirname "$0")"
[ "$(id -u)" = 0 ] || { echo "install.sh: run as root (sudo ./install.sh)" >&2; exit 1; }
# berth-sandbox beside berth: the local provider starts its sandboxes from it
# (faster boot) when it is the same build, else from berth itself.
install -m 0755 berth berth-sandbox berth-provider-local berth-provider-aws berth-provider-gcp berth-provider-azure /usr/local/bin/
install -m 0644 berth.service /etc/systemd/system/berth.service
install -d -m 0755 /etc/berth
if [ ! -e /etc/berth/berth.toml ]; then
  install -m 0600 berth.toml /etc/berth/berth.toml
else
  echo "install.sh: keeping the existing /etc/berth/berth.toml"
fi
# The local provider maps sandboxes to the "berth" subordinate ID ranges.
for f in /etc/subuid /etc/subgid; do
  grep -q '^berth:' "$f" 2>/dev/null || echo "berth:1879048192:65536" >> "$f"
done
systemctl daemon-reload
systemctl enable --now berth
echo "berth is running: systemctl status berth; journalctl -u berth -f"
echo "its API token is /var/lib/berth/api-token (root only): 'sudo berth submit --wait -- make test' finds it;"
echo "give a user a token of their own with 'sudo berth token add NAME' (docs/install.md)"
