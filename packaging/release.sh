#!/usr/bin/env bash
# Builds the release tarballs: static linux/amd64 and linux/arm64 binaries of
# berth, berth-sandbox (the lean binary the local provider starts sandboxes
# from; berth uses it only when it is this same build) and the provider
# plugins, with the licence, README and docs/, systemd unit and example config, and a
# SHA256SUMS file.
#
#   packaging/release.sh v1.2.3            # → dist/berth_v1.2.3_linux_{amd64,arm64}.tar.gz, dist/SHA256SUMS
#   ARCHS=amd64 packaging/release.sh v1.2.3
#   packaging/release.sh --docs-only DIR   # only the pages and what they link to (a test checks the links)
set -euo pipefail
cd "$(dirname "$0")/.."

# ship_docs copies the README, the licence and docs/ into $1, with every file
# or directory of the repository those pages link to (examples, the example
# plugin, bench results) at the same path: a shipped page's link never goes
# nowhere.
ship_docs() {
  cp LICENSE README.md "$1/"
  cp -r docs "$1/docs"
  local p
  for p in $( (grep -ohE '\]\(\.\./[^)# ]+' docs/*.md | sed 's/^](\.\.\///'
              grep -ohE '\]\([^)#: ]+' README.md | sed 's/^](//' | grep -v '^docs/') | sed 's|/$||' | sort -u); do
    [ -e "$1/$p" ] || cp -r --parents "$p" "$1/"
  done
}
if [ "${1:-}" = --docs-only ]; then
  mkdir -p "${2:?usage: packaging/release.sh --docs-only DIR}"
  ship_docs "$2"
  exit 0
fi

version=${1:?usage: packaging/release.sh VERSION (e.g. v1.2.3)}
archs=${ARCHS:-amd64 arm64}
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain 2>/dev/null)" ]; then commit="$commit-dirty"; fi
# The commit's date, not the build's: two builds of one commit are the same
# bytes, and `berth version` calls it the commit date. Outside git there is
# no commit: the date is "unknown" and the archive's times are the build's.
date=$(git log -1 --format=%cI 2>/dev/null || true)
mtime=${date:-$(date -u +%Y-%m-%dT%H:%M:%SZ)}
pkg=github.com/berth-ci/berth/internal/buildinfo
ldflags="-s -w -X $pkg.version=$version -X $pkg.commit=$commit -X $pkg.date=$date"

rm -rf dist && mkdir -p dist
for arch in $archs; do
  name=berth_${version}_linux_${arch}
  out=dist/$name
  mkdir -p "$out"
  for cmd in berth berth-sandbox berth-provider-local berth-provider-aws berth-provider-gcp berth-provider-azure; do
    # Static (no cgo) so one tarball runs on any distribution.
    CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$out/$cmd" "./cmd/$cmd"
  done
  cp packaging/berth.service packaging/berth.toml packaging/install.sh "$out/"
  # The README is a front page; its links lead into docs/.
  ship_docs "$out"
  # Reproducible archives: fixed owner, order and times.
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="$mtime" -C dist -czf "dist/$name.tar.gz" "$name"
  rm -rf "$out"
done
(cd dist && sha256sum ./*.tar.gz | sed 's| \./| |' > SHA256SUMS)
cat dist/SHA256SUMS
