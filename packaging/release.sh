#!/usr/bin/env bash
# Builds the release tarballs: static linux/amd64 and linux/arm64 binaries of
# berth, berth-sandbox (the lean binary the local provider starts sandboxes
# from; berth uses it only when it is this same build) and the provider
# plugins, with the licence, README and docs/, systemd unit and example config, and a
# SHA256SUMS file.
#
#   packaging/release.sh v1.2.3            # → dist/berth_v1.2.3_linux_{amd64,arm64}.tar.gz, dist/SHA256SUMS
#   ARCHS=amd64 packaging/release.sh v1.2.3
set -euo pipefail
cd "$(dirname "$0")/.."
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
  cp LICENSE README.md packaging/berth.service packaging/berth.toml packaging/install.sh "$out/"
  # The README is a front page; its links lead into docs/.
  cp -r docs "$out/docs"
  # Reproducible archives: fixed owner, order and times.
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="$mtime" -C dist -czf "dist/$name.tar.gz" "$name"
  rm -rf "$out"
done
(cd dist && sha256sum ./*.tar.gz | sed 's| \./| |' > SHA256SUMS)
cat dist/SHA256SUMS
