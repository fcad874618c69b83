#!/usr/bin/env bash
# Builds the Kubernetes control plane the Kubernetes tests run against, from the Go module proxy:
#   kube-apiserver, kube-controller-manager, kube-scheduler   k8s.io/kubernetes (tests/k8s/tools/go.mod)
#   kubectl                                                   same (kwokctl checks the server with it)
#   etcd                                                      go.etcd.io/etcd/server/v3 (same module)
#   kwok, kwokctl                                             sigs.k8s.io/kwok (its own go.mod)
# into a cache directory outside the clone, keyed by the versions and the wrapper module's
# go.mod/go.sum, so a second run (and every worktree) reuses the binaries instead of rebuilding.
#
# Usage: tests/k8s/build.sh            builds (or finds) the binaries; prints their directory
# Environment (optional):
#   TETHER_TOOLS_CACHE   cache root (default /var/cache/tether-tools)
#   GO                   Go toolchain (default: go on PATH; >= the go line of tools/go.mod)
#   GOPATH, GOCACHE      Go's module and build caches (Go's defaults); never inside tests/k8s
# The first build takes minutes per binary on two cores (see docs/kubernetes.md); it runs under
# `nice -n 10` so it does not starve other builds. Safe to run concurrently: one build at a time
# per cache key, the directory appears complete or not at all.
set -euo pipefail

die() { echo "tests/k8s/build.sh: error: $*" >&2; exit 1; }
log() { echo "tests/k8s/build.sh: $*" >&2; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOLS=$HERE/tools
GO=${GO:-go}
KWOK_VERSION=v0.8.0

command -v "$GO" >/dev/null 2>&1 || die "'$GO' not found on PATH (the build needs Go >= $(sed -n 's/^go //p' "$TOOLS/go.mod"))"
command -v flock >/dev/null 2>&1 || die "flock not found (util-linux)"
command -v sha256sum >/dev/null 2>&1 || die "sha256sum not found (coreutils)"

# One source of truth for the versions: the wrapper module's requirements.
version_of() {
	local v
	v=$(awk -v m="$1" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$TOOLS/go.mod")
	[[ -n $v ]] || die "$TOOLS/go.mod does not require $1"
	echo "$v"
}
KUBE_VERSION=$(version_of k8s.io/kubernetes)
ETCD_VERSION=$(version_of go.etcd.io/etcd/server/v3)
[[ $KUBE_VERSION =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]] || die "unexpected k8s.io/kubernetes version '$KUBE_VERSION'"
KUBE_MAJOR=${BASH_REMATCH[1]}
KUBE_MINOR=${BASH_REMATCH[2]}

HASH=$(cat "$TOOLS/go.mod" "$TOOLS/go.sum" <(echo "kwok $KWOK_VERSION") | sha256sum | cut -c1-12)
CACHE_ROOT=${TETHER_TOOLS_CACHE:-/var/cache/tether-tools}
KEY=k8s-$KUBE_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION-$HASH
DEST=$CACHE_ROOT/$KEY
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok kwokctl)

complete() {
	local b
	for b in "${BINARIES[@]}"; do [[ -x $1/bin/$b ]] || return 1; done
}

mkdir -p "$CACHE_ROOT" || die "cannot create the cache root $CACHE_ROOT (set TETHER_TOOLS_CACHE)"
if complete "$DEST"; then
	log "cached: $DEST/bin"
	echo "$DEST/bin"
	exit 0
fi

exec 9>"$CACHE_ROOT/$KEY.lock"
flock 9
if complete "$DEST"; then # built by a concurrent run while we waited
	echo "$DEST/bin"
	exit 0
fi

# A GOPATH module cache inside the wrapper module breaks `go mod` there.
for d in "$(GOFLAGS= "$GO" env GOMODCACHE)" "$(GOFLAGS= "$GO" env GOCACHE)"; do
	case "$d/" in "$HERE"/*) die "Go's cache $d is inside $HERE: set GOPATH/GOCACHE elsewhere" ;; esac
done

STAGE=$(mktemp -d "$CACHE_ROOT/.$KEY.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/bin"
unset GOROOT GOBIN
export GO111MODULE=on GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0

VERSION_PKG=k8s.io/component-base/version
# Without these the server reports v0.0.0-master+$Format:%H$, which clients cannot parse.
KUBE_LDFLAGS="-s -w -X $VERSION_PKG.gitVersion=$KUBE_VERSION -X $VERSION_PKG.gitMajor=$KUBE_MAJOR \
-X $VERSION_PKG.gitMinor=$KUBE_MINOR -X $VERSION_PKG.gitTreeState=clean -X $VERSION_PKG.buildDate=1970-01-01T00:00:00Z"

total=$SECONDS
build() { # NAME PACKAGE LDFLAGS
	local t0=$SECONDS
	(cd "$TOOLS" && GOFLAGS=-mod=readonly nice -n 10 "$GO" build -trimpath -buildvcs=false -ldflags "$3" -o "$STAGE/bin/$1" "$2") ||
		die "building $1 ($2) failed ($("$GO" version))"
	log "built $1 in $((SECONDS - t0))s"
}
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$KUBE_LDFLAGS"
build etcd go.etcd.io/etcd/server/v3 "-s -w"
t0=$SECONDS
GOBIN=$STAGE/bin GOFLAGS= nice -n 10 "$GO" install -trimpath -ldflags "-s -w" \
	"sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION" ||
	die "building kwok/kwokctl $KWOK_VERSION failed ($("$GO" version))"
log "built kwok kwokctl in $((SECONDS - t0))s"
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$KUBE_LDFLAGS"
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$KUBE_LDFLAGS"
build kubectl k8s.io/kubernetes/cmd/kubectl "$KUBE_LDFLAGS"

complete "$STAGE" || die "the build finished without every binary in $STAGE/bin"
{
	echo "kubernetes $KUBE_VERSION"
	echo "etcd $ETCD_VERSION"
	echo "kwok $KWOK_VERSION"
	echo "go $("$GO" env GOVERSION)"
	echo "built_seconds $((SECONDS - total))"
} >"$STAGE/VERSIONS"
chmod 0755 "$STAGE"
mv -T "$STAGE" "$DEST" || die "cannot move the build into $DEST"
trap - EXIT
log "built every binary in $((SECONDS - total))s: $DEST/bin"
echo "$DEST/bin"
