#!/usr/bin/env bash
# Builds the Go go-plugin interop peers (tests/go) in two configurations:
#   {kv,counter}{plugin,host}-v18, probeplugin-v18    go-plugin v1.8.x (pinned in go.mod/go.sum), machine's `go`, module mode
#   otelplugin-v18                                     the same, with OpenTelemetry (otelgrpc + OTLP to the host)
#   callerplugin-v18                                   the same, calling other catalog plugins through a tether host
#   {kv,counter}{plugin,host}-v101, probeplugin-v101  Debian's go-plugin 1.0.1, /usr/lib/go-1.19/bin/go, GOPATH mode
#   callerplugin-v101                                  the same, calling other catalog plugins through a tether host
# Usage: tests/go/build.sh OUTDIR
# The binaries land in OUTDIR; generated code, staged sources and the GOPATH go to
# OUTDIR/.go-interop-build. Idempotent; safe to run concurrently on the same OUTDIR.
# Environment (optional):
#   GO_INTEROP_VARIANTS  which to build, default "v18 v101"
#   GO                   Go for v18 (default: go on PATH)
#   GO119                Go for v101 (default: /usr/lib/go-1.19/bin/go)
#   PROTOC, PROTOC_GEN_GO  default: protoc on PATH, /usr/bin/protoc-gen-go (Debian, v1.3)
set -euo pipefail

die() { echo "tests/go/build.sh: error: $*" >&2; exit 1; }

[[ $# -eq 1 && -n "$1" && "$1" != -* ]] || { echo "usage: $0 OUTDIR" >&2; exit 2; }

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROTO_DIR=$(cd "$SRC/../../examples/proto" 2>/dev/null && pwd) || die "examples/proto not found next to tests/go"
[[ -f "$PROTO_DIR/kv.proto" ]] || die "$PROTO_DIR/kv.proto is missing"
[[ -f "$PROTO_DIR/counter.proto" ]] || die "$PROTO_DIR/counter.proto is missing"
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
BUILD=$OUT/.go-interop-build
mkdir -p "$BUILD"

VARIANTS=${GO_INTEROP_VARIANTS:-v18 v101}
GO=${GO:-go}
GO119=${GO119:-/usr/lib/go-1.19/bin/go}
PROTOC=${PROTOC:-protoc}
PROTOC_GEN_GO=${PROTOC_GEN_GO:-/usr/bin/protoc-gen-go}
DEBIAN_PKGS="golang-1.19-go golang-github-hashicorp-go-plugin-dev golang-google-grpc-dev protobuf-compiler golang-goprotobuf-dev"
GOCODE=/usr/share/gocode

# Serialize concurrent runs on the same OUTDIR (e.g. parallel test binaries).
if command -v flock >/dev/null 2>&1; then
	exec 9>"$BUILD/lock"
	flock 9
fi

# Go needs a cache directory; fall back to one under OUTDIR when HOME is unset.
if [[ -z "${GOCACHE:-}" && -z "${HOME:-}" && -z "${XDG_CACHE_HOME:-}" ]]; then
	export GOCACHE=$BUILD/gocache
fi

want() { [[ " $VARIANTS " == *" $1 "* ]]; }
for v in $VARIANTS; do
	[[ $v == v18 || $v == v101 ]] || die "unknown variant '$v' in GO_INTEROP_VARIANTS (known: v18 v101)"
done

# --- toolchain checks -------------------------------------------------------------------------
command -v "$PROTOC" >/dev/null 2>&1 || die "protoc not found (apt-get install protobuf-compiler)"
[[ -x "$PROTOC_GEN_GO" ]] || die "$PROTOC_GEN_GO not found (apt-get install golang-goprotobuf-dev; it provides protoc-gen-go 1.3)"
if want v18; then
	command -v "$GO" >/dev/null 2>&1 || die "'$GO' not found on PATH: the v18 build needs a Go toolchain (>= the go line in tests/go/go.mod)"
fi
if want v101; then
	[[ -x "$GO119" ]] || die "$GO119 not found: the v101 build needs Debian's Go 1.19 (apt-get install $DEBIAN_PKGS)"
	for p in github.com/hashicorp/go-plugin google.golang.org/grpc github.com/golang/protobuf/proto; do
		[[ -d "$GOCODE/src/$p" ]] || die "$GOCODE/src/$p not found: the v101 build needs Debian's Go packages (apt-get install $DEBIAN_PKGS)"
	done
fi

# --- generate kv.pb.go ------------------------------------------------------------------------
# protoc-gen-go 1.3 with plugins=grpc: one file for messages + service. Its output also builds in
# module mode against github.com/golang/protobuf v1.5 and current grpc-go (both still define
# ProtoPackageIsVersion3 / SupportPackageIsVersion6), so both variants share it.
GEN=$BUILD/gen
rm -rf "$GEN.tmp"
mkdir -p "$GEN.tmp"
"$PROTOC" --plugin=protoc-gen-go="$PROTOC_GEN_GO" -I "$PROTO_DIR" \
	--go_out=plugins=grpc,paths=source_relative,Mkv.proto=tether.test/interop/proto:"$GEN.tmp" \
	kv.proto || die "protoc failed on $PROTO_DIR/kv.proto"
[[ -f "$GEN.tmp/kv.pb.go" ]] || die "protoc did not produce kv.pb.go"
# counter.proto is also `package proto` with clashing message names: its own Go package.
"$PROTOC" --plugin=protoc-gen-go="$PROTOC_GEN_GO" -I "$PROTO_DIR" \
	--go_out=plugins=grpc,paths=source_relative,Mcounter.proto=tether.test/interop/counterproto:"$GEN.tmp" \
	counter.proto || die "protoc failed on $PROTO_DIR/counter.proto"
[[ -f "$GEN.tmp/counter.pb.go" ]] || die "protoc did not produce counter.pb.go"
# tether's plugin-to-plugin host service (docs/PROTOCOL.md §10.3), for callerplugin.
PLUGINS_PROTO_DIR=$(cd "$SRC/../../proto/proto" 2>/dev/null && pwd) || die "proto/proto not found next to tests/go"
"$PROTOC" --plugin=protoc-gen-go="$PROTOC_GEN_GO" -I "$PLUGINS_PROTO_DIR" \
	--go_out=plugins=grpc,paths=source_relative,Mtether/plugins/v1/plugins.proto=tether.test/interop/pluginsproto:"$GEN.tmp" \
	tether/plugins/v1/plugins.proto || die "protoc failed on $PLUGINS_PROTO_DIR/tether/plugins/v1/plugins.proto"
[[ -f "$GEN.tmp/tether/plugins/v1/plugins.pb.go" ]] || die "protoc did not produce plugins.pb.go"
rm -rf "$GEN"
mv "$GEN.tmp" "$GEN"

# stage DEST: copy the Go sources + generated code into DEST (the root of tether.test/interop).
stage() {
	local dest=$1
	rm -rf "$dest"
	mkdir -p "$dest/proto" "$dest/counterproto" "$dest/pluginsproto"
	cp "$SRC/go.mod" "$SRC/go.sum" "$dest/"
	cp -R "$SRC/shared" "$SRC/kvplugin" "$SRC/kvhost" "$SRC/probeplugin" "$SRC/counter" "$SRC/counterplugin" "$SRC/counterhost" "$SRC/otelplugin" "$SRC/callerplugin" "$dest/"
	cp "$GEN/kv.pb.go" "$dest/proto/"
	cp "$GEN/counter.pb.go" "$dest/counterproto/"
	cp "$GEN/tether/plugins/v1/plugins.pb.go" "$dest/pluginsproto/"
}

# --- v18: module mode, machine's Go, versions from go.mod/go.sum via the module proxy --------
if want v18; then
	t0=$SECONDS
	stage "$BUILD/mod"
	(
		cd "$BUILD/mod"
		unset GOROOT
		export GO111MODULE=on GOWORK=off GOFLAGS=-mod=readonly GOTOOLCHAIN=local CGO_ENABLED=0
		"$GO" build -buildvcs=false -o "$OUT/kvplugin-v18" ./kvplugin
		"$GO" build -buildvcs=false -tags goplugin_mux -o "$OUT/kvhost-v18" ./kvhost
		"$GO" build -buildvcs=false -o "$OUT/probeplugin-v18" ./probeplugin
		"$GO" build -buildvcs=false -o "$OUT/counterplugin-v18" ./counterplugin
		"$GO" build -buildvcs=false -tags goplugin_mux -o "$OUT/counterhost-v18" ./counterhost
		"$GO" build -buildvcs=false -o "$OUT/otelplugin-v18" ./otelplugin
		"$GO" build -buildvcs=false -o "$OUT/callerplugin-v18" ./callerplugin
	) || die "v18 build failed (go-plugin $(sed -n 's/.*hashicorp\/go-plugin \(v[^ ]*\).*/\1/p' "$SRC/go.mod"), $("$GO" version 2>&1))"
	echo "tests/go/build.sh: built kvplugin-v18 kvhost-v18 probeplugin-v18 counterplugin-v18 counterhost-v18 otelplugin-v18 callerplugin-v18 in $((SECONDS - t0))s" >&2
fi

# --- v101: GOPATH mode, Debian's Go 1.19 and Debian's go-plugin 1.0.1 -------------------------
if want v101; then
	t0=$SECONDS
	stage "$BUILD/gopath/src/tether.test/interop"
	(
		cd "$BUILD/gopath/src/tether.test/interop"
		unset GOROOT GOWORK GOTOOLCHAIN
		export GO111MODULE=off GOPATH="$BUILD/gopath:$GOCODE" GOFLAGS= CGO_ENABLED=0 GOPROXY=off
		"$GO119" build -o "$OUT/kvplugin-v101" ./kvplugin
		"$GO119" build -o "$OUT/kvhost-v101" ./kvhost
		"$GO119" build -o "$OUT/probeplugin-v101" ./probeplugin
		"$GO119" build -o "$OUT/counterplugin-v101" ./counterplugin
		"$GO119" build -o "$OUT/counterhost-v101" ./counterhost
		"$GO119" build -o "$OUT/callerplugin-v101" ./callerplugin
	) || die "v101 build failed ($("$GO119" version 2>&1), GOPATH=$BUILD/gopath:$GOCODE)"
	echo "tests/go/build.sh: built kvplugin-v101 kvhost-v101 probeplugin-v101 counterplugin-v101 counterhost-v101 callerplugin-v101 in $((SECONDS - t0))s" >&2
fi
