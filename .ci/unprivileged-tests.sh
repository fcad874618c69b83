#!/usr/bin/env bash
# Runs the security test binaries of tests/ as an unprivileged user (a non-root host), after
# `cargo test --workspace` built them and the Go peers as root. Fails when one fails, or when
# the user cannot read the checkout or the target directory (a clone under a 0700 home).
# Usage: bash .ci/unprivileged-tests.sh   (as root, from anywhere)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# tether_tests::host_user::UNPRIVILEGED
uid=61234
gid=61234
# The test targets (tests/tests/NAME.rs) that attack or check the confinement.
tests=(empty_world world escapes confinement network catalog_policy policy terminal_text warning_flood leftovers diagnosis)

[ "$(id -u)" -eq 0 ] || { echo "unprivileged-tests: run as root (it switches to uid $uid)" >&2; exit 1; }
as_user() { setpriv --reuid="$uid" --regid="$gid" --clear-groups "$@"; }

start=$SECONDS
args=()
for t in "${tests[@]}"; do args+=(--test "$t"); done
mapfile -t binaries < <(
	cargo test --workspace --locked --no-run --message-format=json "${args[@]}" 2>/dev/null |
		python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "test" in m["target"]["kind"]:
        print(m["executable"])
'
)
[ "${#binaries[@]}" -eq "${#tests[@]}" ] || {
	echo "unprivileged-tests: expected ${#tests[@]} test binaries, cargo listed ${#binaries[@]}" >&2
	exit 1
}

for path in tests/Cargo.toml examples/proto/kv.proto target/debug/probe-plugin target/debug/tether "${binaries[@]}"; do
	as_user test -r "$path" || {
		echo "unprivileged-tests: uid $uid cannot read $PWD/$path: the checkout and its target directory must be readable and searchable by every user (clone outside a 0700 home, or chmod o+rx its parent directories)" >&2
		exit 1
	}
done

home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
chown "$uid:$gid" "$home"

failed=()
for binary in "${binaries[@]}"; do
	name=$(basename "$binary")
	t0=$SECONDS
	echo "--- ${name%-*} as uid $uid"
	if (cd tests && as_user env -u XDG_RUNTIME_DIR HOME="$home" TETHER_REQUIRE_PEERS=1 "$binary"); then
		echo "--- ${name%-*}: passed in $((SECONDS - t0)) s"
	else
		echo "--- ${name%-*}: FAILED in $((SECONDS - t0)) s"
		failed+=("${name%-*}")
	fi
done
echo "unprivileged-tests: ${#binaries[@]} binaries as uid $uid in $((SECONDS - start)) s"
[ "${#failed[@]}" -eq 0 ] || { echo "unprivileged-tests: failed as uid $uid: ${failed[*]}" >&2; exit 1; }
