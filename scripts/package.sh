#!/usr/bin/env bash
# Builds the Debian package apelora (deploy/debian/nfpm.yaml: the three binaries, the
# systemd units, the sysusers.d file, the root-only environment files) from this checkout
# and prints the .deb's path. `--help` says more.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
	cat <<'USAGE'
usage: scripts/package.sh [-o DIR]

Builds bin/apelora_VERSION-REVISION_amd64.deb (or into DIR) with nfpm, pinned in go.mod
as a Go tool (`go tool nfpm`), and prints its path. Needs Go and git, nothing else.

Reproducible: the same source and Go toolchain give the same bytes. The binaries are
built with -trimpath, without cgo and without -buildvcs (the version and commit are
stamped with -ldflags instead); every file in the package has SOURCE_DATE_EPOCH, the
commit's time, as its mtime. scripts/package-check.sh builds twice and compares.

Environment (each defaults from git):
  APELORA_VERSION    the package version: the tag vX.Y.Z on HEAD without its v, else
                     0.0.0~gitYYYYMMDDHHMMSS.COMMIT12 (the commit's time, UTC); +dirty is
                     added when tracked files have uncommitted changes
  APELORA_COMMIT     the commit `apelora version` names (-dirty added likewise)
  SOURCE_DATE_EPOCH  the commit's time, in seconds since 1970
USAGE
}

out=bin
while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help | help) usage; exit 0 ;;
	-o) out=${2:?"-o needs a directory"}; shift 2 ;;
	*) usage >&2; echo "package: unknown argument $1" >&2; exit 2 ;;
	esac
done

fail() { echo "package: $*" >&2; exit 1; }
command -v go >/dev/null || fail "Go is not installed: install Go 1.26 or newer (see go.mod)"

if [ -z "${APELORA_COMMIT:-}" ] || [ -z "${APELORA_VERSION:-}" ] || [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	git rev-parse --git-dir >/dev/null 2>&1 ||
		fail "not a git checkout: set APELORA_VERSION, APELORA_COMMIT and SOURCE_DATE_EPOCH"
	dirty=
	git diff --quiet HEAD -- || dirty=1
	: "${SOURCE_DATE_EPOCH:=$(git log -1 --format=%ct HEAD)}"
	: "${APELORA_COMMIT:=$(git rev-parse HEAD)${dirty:+-dirty}}"
	if [ -z "${APELORA_VERSION:-}" ]; then
		if tag=$(git describe --tags --exact-match --match 'v[0-9]*' HEAD 2>/dev/null); then
			APELORA_VERSION=${tag#v}
		else
			APELORA_VERSION=0.0.0~git$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y%m%d%H%M%S).$(git rev-parse --short=12 HEAD)
		fi
		APELORA_VERSION+=${dirty:++dirty}
	fi
fi
# The packaging's own revision of that version (a new one when only deploy/debian changes).
APELORA_REVISION=1
export APELORA_VERSION APELORA_REVISION SOURCE_DATE_EPOCH

# What nfpm.yaml takes from the build: fixed paths in the checkout (nfpm expands no
# variables in them).
stage=bin/stage
rm -rf "$stage"
mkdir -p "$stage"
# What this build was stamped with: package-check.sh builds a copy of the tree (no .git) with it.
printf 'APELORA_VERSION=%q\nAPELORA_REVISION=%q\nAPELORA_COMMIT=%q\nSOURCE_DATE_EPOCH=%q\n' \
	"$APELORA_VERSION" "$APELORA_REVISION" "$APELORA_COMMIT" "$SOURCE_DATE_EPOCH" >"$stage/stamp.env"

buildinfo=github.com/apelora/fabric/internal/buildinfo
# -s -w: no symbol table or DWARF (Debian ships stripped binaries); the build information
# `apelora version` falls back to is kept either way.
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -buildvcs=false \
	-ldflags "-s -w -X $buildinfo.version=$APELORA_VERSION -X $buildinfo.commit=$APELORA_COMMIT" \
	-o "$stage/" ./cmd/apelora ./cmd/apelora-worker ./cmd/apeloractl

# nfpm writes this as /usr/share/doc/apelora/changelog.Debian.gz (Debian wants one).
cat >"$stage/changelog.yml" <<CHANGELOG
- semver: "$APELORA_VERSION-$APELORA_REVISION"
  date: "$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
  packager: "Apelora fabric maintainers <maintainers@users.noreply.a-seed-d0f0a480.example>"
  deb:
    urgency: medium
    distributions: [unstable]
  changes:
    - note: "Built from commit $APELORA_COMMIT."
CHANGELOG

mkdir -p "$out"
deb="$out/apelora_${APELORA_VERSION}-${APELORA_REVISION}_amd64.deb"
go tool nfpm package --config deploy/debian/nfpm.yaml --packager deb --target "$deb" >&2
echo "$deb"
