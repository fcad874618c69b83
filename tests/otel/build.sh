#!/usr/bin/env bash
# Builds the real telemetry receivers the telemetry tests send to, from the Go module proxy:
#   otelcol   an OpenTelemetry Collector assembled by the collector builder (ocb) from
#             tests/otel/otelcol-builder.yaml: OTLP receiver (gRPC + HTTP) -> file exporter
#   promcheck tests/otel/promcheck: `promtool check metrics` (the same promlint package and
#             version) plus the Prometheus server's scrape parser (model/textparse), printing the
#             samples as JSON lines so tests compare the figures (its doc comment says why not
#             promtool itself)
# Usage: tests/otel/build.sh OUTDIR
# The binaries are built once per version into a cache OUTSIDE the clone and linked into OUTDIR
# (OUTDIR/otelcol, OUTDIR/promcheck). A warm run takes well under a second; a cold one builds
# several minutes on 2 cores (tests/otel/README.md has the measured times).
# Environment (optional):
#   TETHER_TOOLS_CACHE  cache root (default /var/cache/tether-tools, else ~/.cache/tether-tools
#                       when that is not writable)
#   GO                  Go toolchain (default: go on PATH; needs >= the go lines below)
#   OTEL_TOOLS          which to build, default "otelcol promcheck"
set -euo pipefail

die() { echo "tests/otel/build.sh: error: $*" >&2; exit 1; }

[[ $# -eq 1 && -n "$1" && "$1" != -* ]] || { echo "usage: $0 OUTDIR" >&2; exit 2; }

# The versions. Moving one changes its cache key, so the next run builds it.
# The collector's modules move together on one release train (core v0.x.0 = stable v1.(x-94).0);
# 0.161.0 is the newest train whose file exporter builds here: from 0.162.0 on, the module proxy
# refuses the zip of contrib's otlpencodingextension, which `go mod tidy` needs for the file
# exporter's tests (checked 2026-12-01).
OCB_VERSION=v0.161.0
# promcheck's versions (Prometheus v0.316.0 = 3.x, client_golang v1.25.0 as that Prometheus
# pins) are in tests/otel/promcheck/go.mod and go.sum.

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MANIFEST=$SRC/otelcol-builder.yaml
[[ -f "$MANIFEST" ]] || die "$MANIFEST is missing"
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
GO=${GO:-go}
TOOLS=${OTEL_TOOLS:-otelcol promcheck}
for t in $TOOLS; do
	[[ $t == otelcol || $t == promcheck ]] || die "unknown tool '$t' in OTEL_TOOLS (known: otelcol promcheck)"
done

# --- the cache --------------------------------------------------------------------------------
cache_root() {
	if [[ -n "${TETHER_TOOLS_CACHE:-}" ]]; then
		echo "$TETHER_TOOLS_CACHE"
	elif mkdir -p /var/cache/tether-tools 2>/dev/null && [[ -w /var/cache/tether-tools ]]; then
		echo /var/cache/tether-tools
	elif [[ -n "${HOME:-}" ]]; then
		echo "${XDG_CACHE_HOME:-$HOME/.cache}/tether-tools"
	else
		die "no writable cache: set TETHER_TOOLS_CACHE"
	fi
}
CACHE=$(cache_root)
mkdir -p "$CACHE" || die "cannot create the cache directory $CACHE (set TETHER_TOOLS_CACHE)"
CACHE=$(cd "$CACHE" && pwd)

# The collector's key: the builder's version and the manifest's content (its component versions).
manifest_sum=$(sha256sum "$MANIFEST" | cut -c1-12)
OTELCOL_DIR=$CACHE/otelcol-${OCB_VERSION#v}-$manifest_sum
# promcheck's key: its sources and pinned module versions.
promcheck_sum=$(cat "$SRC/promcheck/go.mod" "$SRC/promcheck/go.sum" "$SRC/promcheck/main.go" | sha256sum | cut -c1-12)
PROMCHECK_DIR=$CACHE/promcheck-$promcheck_sum

# One build at a time per cache (tests build concurrently; CI builds before them).
if command -v flock >/dev/null 2>&1; then
	exec 9>"$CACHE/.otel.lock"
	flock 9
fi

go_env() {
	local go_path
	go_path=$(command -v "$GO") || die "'$GO' not found on PATH: the receivers are built from the Go module proxy with Go >= 1.26"
	# The collector builder runs the `go` it finds on PATH.
	PATH=$(dirname "$go_path"):$PATH
	unset GOROOT
	export GO111MODULE=on GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
	# Builds on a shared 2-core machine: below the tests' priority.
	NICE=(nice -n 10)
}

# install_dir DIR BUILD_FUNCTION: builds into DIR.tmp, then moves it into place (a half-built
# directory is never mistaken for a cached one).
install_dir() {
	local dir=$1 build=$2 t0=$SECONDS
	rm -rf "$dir.tmp"
	mkdir -p "$dir.tmp/bin"
	"$build" "$dir.tmp" || { rm -rf "$dir.tmp"; return 1; }
	rm -rf "$dir"
	mv "$dir.tmp" "$dir"
	echo "tests/otel/build.sh: built $(basename "$dir") in $((SECONDS - t0))s" >&2
}

build_otelcol() {
	local dir=$1
	go_env
	GOBIN=$dir/bin "${NICE[@]}" "$GO" install "go.opentelemetry.io/collector/cmd/builder@$OCB_VERSION" ||
		die "installing the collector builder $OCB_VERSION failed ($("$GO" version 2>&1))"
	# The manifest leaves output_path to us: the generated sources live in the cache, not the clone.
	sed "s|^  # output_path.*|  output_path: $dir/src|" "$MANIFEST" >"$dir/builder.yaml"
	grep -q "output_path: $dir/src" "$dir/builder.yaml" || die "$MANIFEST has no '  # output_path' line to fill in"
	"${NICE[@]}" "$dir/bin/builder" --config "$dir/builder.yaml" >"$dir/builder.log" 2>&1 || {
		tail -30 "$dir/builder.log" >&2
		die "the collector builder failed (full log above: $dir/builder.log)"
	}
	mv "$dir/src/tether-otelcol" "$dir/bin/otelcol"
	rm "$dir/bin/builder"
	# Keep the generated go.mod/go.sum (what was built) and drop the rest of the sources.
	find "$dir/src" -mindepth 1 -maxdepth 1 ! -name go.mod ! -name go.sum -exec rm -rf {} +
	"$dir/bin/otelcol" --version >/dev/null || die "the built collector does not run"
}

build_promcheck() {
	local dir=$1
	go_env
	# Built from a copy: nothing is written into the clone.
	cp -R "$SRC/promcheck" "$dir/src"
	(cd "$dir/src" && GOFLAGS="$GOFLAGS -mod=readonly" "${NICE[@]}" "$GO" build -o "$dir/bin/promcheck" .) ||
		die "building promcheck failed ($("$GO" version 2>&1))"
	rm -rf "$dir/src"
	# A family without help text is a lint problem: exit status 3, as promtool's.
	local rc=0
	printf '# TYPE up gauge\nup 1\n' | "$dir/bin/promcheck" >/dev/null 2>&1 || rc=$?
	[[ $rc -eq 3 ]] || die "the built promcheck does not lint (exit status $rc for a family without help text)"
}

link() {
	ln -sfn "$1" "$OUT/$2.tmp"
	mv -T "$OUT/$2.tmp" "$OUT/$2"
}

if [[ " $TOOLS " == *" otelcol "* ]]; then
	[[ -x $OTELCOL_DIR/bin/otelcol ]] || install_dir "$OTELCOL_DIR" build_otelcol
	link "$OTELCOL_DIR/bin/otelcol" otelcol
fi
if [[ " $TOOLS " == *" promcheck "* ]]; then
	[[ -x $PROMCHECK_DIR/bin/promcheck ]] || install_dir "$PROMCHECK_DIR" build_promcheck
	link "$PROMCHECK_DIR/bin/promcheck" promcheck
fi
