#!/usr/bin/env bash
# The KV example end to end: builds the workspace, then a tether host (kv-host) launches the
# tether KV plugin (kv-plugin) twice — once to store a value, once to read it back — over
# AutoMTLS with throw-away certificates. With TETHER_DEMO_GO=1 it also builds go-plugin's own KV
# plugin (needs Go; see tests/go/README.md) and runs the same host against it.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

cargo build --workspace --quiet
bin=$repo/target/debug
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

run() { printf '$ %s\n' "$*"; "$@"; }

echo "# tether host -> tether plugin (AutoMTLS), working directory $work"
export KV_PLUGIN=$bin/kv-plugin
run "$bin/kv-host" put greeting "hello from tether"
run "$bin/kv-host" get greeting
run ls "$work"

if [[ "${TETHER_DEMO_GO:-0}" == 1 ]]; then
	echo
	echo "# tether host -> go-plugin v1.8 plugin (AutoMTLS)"
	bash "$repo/tests/go/build.sh" "$repo/target/go-peers" >/dev/null
	export KV_PLUGIN=$repo/target/go-peers/kvplugin-v18
	run "$bin/kv-host" put greeting "hello from go-plugin"
	run "$bin/kv-host" get greeting
fi
