#!/usr/bin/env bash
# Benchmarks of tether side by side with go-plugin, one command:
#
#   bash bench/run.sh [--quick] [tether-bench options]
#
# Builds the release programs (the drivers kv-bench, kv-step, counter-bench, pingpong,
# tether-bench), the plugins kv-plugin and counter-plugin as the SDK recommends shipping them (the
# `plugin` profile, statically linked: bench/BENCHMARKS.md, Decisions) and the Go go-plugin peers
# (tests/go/build.sh: go-plugin v1.8 with the machine's Go, Debian's go-plugin 1.0.1 with Go 1.19),
# then runs tether-bench, which alternates tether, go-plugin and the raw unix-socket floor in rounds
# and writes bench/BENCHMARKS.md (its generated section) and bench/bench-results.json.
# The runners' rows (gVisor vs process, one container per workflow step vs a long-lived plugin)
# need runsc and root; without them those rows say why (TETHER_REQUIRE_PEERS=1 makes it an error).
# --quick: one round with tiny counts, written to target/bench-quick/ (a smoke run; CI-sized).
# `target/release/tether-bench --help` lists the other options (rounds, paths, --no-go101).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

echo "bench/run.sh: building release programs" >&2
cargo build --release --locked -p tether-bench --bin tether-bench --bin kv-bench --bin kv-step --bin counter-bench --bin pingpong
# An explicit --target keeps RUSTFLAGS off build scripts and proc macros, and the static
# plugins in a directory of their own.
HOST=$(rustc -vV | sed -n 's/^host: //p')
STATIC=
[[ $HOST == *-linux-gnu ]] && STATIC="-C target-feature=+crt-static"
echo "bench/run.sh: building the plugins (profile plugin, ${STATIC:-dynamically linked}, $HOST)" >&2
RUSTFLAGS="${RUSTFLAGS:-} $STATIC" cargo build --profile plugin --locked --target "$HOST" \
	-p tether-examples --bin kv-plugin --bin counter-plugin
echo "bench/run.sh: building the Go go-plugin peers" >&2
bash tests/go/build.sh target/go-peers
exec target/release/tether-bench --plugin-dir "target/$HOST/plugin" "$@"
