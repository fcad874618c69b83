#!/usr/bin/env bash
# An installed `tether` works outside the source tree (issue 16 item 1): `cargo install` it into
# a temporary root, then run the CLI guide's examples (docs/cli.md) from a directory outside the checkout,
# with nothing from the checkout's environment (no TETHER_CATALOG, no .cargo/config.toml).
# Any failing command fails the script. Needs the workspace's debug binaries (kv-plugin), which
# the tests build; the install reuses target/ (a debug build, so it costs seconds, not a
# release build of ~400 crates).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="$(mktemp -d)"
site="$(mktemp -d)"
trap 'rm -rf "$root" "$site"' EXIT

cargo install --quiet --path "$repo/cli" --root "$root" --locked --debug --target-dir "$repo/target"
export PATH="$root/bin:$PATH"
unset TETHER_CATALOG
cd "$site"
case "$(command -v tether)" in "$root"/*) ;; *) echo "tether is not the installed one" >&2; exit 1 ;; esac

run() { printf '+ %s\n' "$*" >&2; "$@"; }
expect() { # expect STATUS COMMAND...: the command exits with STATUS
	local want=$1 got=0
	shift
	printf '+ %s (expect exit %s)\n' "$*" "$want" >&2
	"$@" || got=$?
	[ "$got" -eq "$want" ] || { echo "exit $got, expected $want" >&2; exit 1; }
}

run tether --help >/dev/null
run tether --version
# No catalog anywhere: exit 4, and the message names all three places.
expect 4 tether list
# The demo, copied out of the checkout: ./catalog, with its grants, secrets, workflow, artifacts.
cp -r "$repo/examples/agent/." "$site/"
# The demo's Rust steps are the workspace's `agent-demo` (built by the tests): into the copy's bin/,
# and found with --bin-dir for the catalog in the checkout.
cp "$repo/target/debug/agent-demo" "$site/catalog/bin/"
run tether list | grep '^catalog .*/catalog (from ./catalog' >/dev/null
run tether check --catalog "$repo/examples/agent/catalog" --bin-dir "$repo/target/debug"
run tether run | grep '^steps run: 10 ' >/dev/null
TETHER_CATALOG="$repo/examples/agent/catalog" run tether run --repeat 10 --bin-dir "$repo/target/debug" \
	| grep '^steps run: 100 ' >/dev/null
run tether call --catalog catalog --plugin word-count tether.agent.v1.Executor/Execute \
	'{"step":"s","paramsJson":"{\"text\":\"one two\"}"}' | grep '"words\\":2' >/dev/null
# Any go-plugin plugin by command line: the CLI guide's KV examples.
kv="$repo/target/debug/kv-plugin"
[ "$(run tether call --cmd "$kv" --cookie BASIC_PLUGIN=hello --work-dir . \
	--proto "$repo/examples/proto/kv.proto" proto.KV/Put '{"key":"x","value":"eQ=="}')" = '{}' ]
[ "$(run tether call --cmd "$kv" --cookie BASIC_PLUGIN=hello --work-dir . \
	proto.KV/Get '{"key":"x"}')" = '{"value":"eQ=="}' ]
[ -f kv_x ]
run tether inspect --cmd "$kv" --cookie BASIC_PLUGIN=hello | grep '^service proto.KV$' >/dev/null
# Into a closed pipe: quiet, status 141 (docs/cli.md's exit statuses).
set +o pipefail
tether inspect --cmd "$kv" --cookie BASIC_PLUGIN=hello 2>"$site/err" | head -1 >/dev/null
status=${PIPESTATUS[0]}
set -o pipefail
if ! { [ "$status" -eq 141 ] || [ "$status" -eq 0 ]; } || [ -s "$site/err" ]; then
	echo "inspect | head -1: exit $status, stderr: $(cat "$site/err")" >&2
	exit 1
fi
echo "installed tether: the CLI guide's examples passed outside the checkout"
