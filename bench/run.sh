#!/usr/bin/env bash
# Benchmarks of tether side by side with go-plugin, one command:
#
#   bash bench/run.sh [--quick] [tether-bench options]
#
# Builds the release programs (kv-plugin, counter-plugin, and the drivers kv-bench, kv-step, counter-bench, pingpong,
# tether-bench) and the Go go-plugin peers (tests/go/build.sh: go-plugin v1.8 with the machine's
# Go, Debian's go-plugin 1.0.1 with Go 1.19), then runs tether-bench, which alternates tether, go-plugin and the raw unix-socket
# floor in rounds and writes BENCHMARKS.md (its generated section) and bench-results.json.
# The runners' rows (gVisor vs process, one container per workflow step vs a long-lived plugin)
# need runsc and root; without them those rows say why (TETHER_REQUIRE_PEERS=1 makes it an error).
# --quick: one round with tiny counts, written to target/bench-quick/ (a smoke run; CI-sized).
# `target/release/tether-bench --help` lists the other options (rounds, paths, --no-go101).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

echo "bench/run.sh: building release programs" >&2
cargo build --release --locked -p tether-examples --bin kv-plugin --bin counter-plugin \
	-p tether-bench --bin tether-bench --bin kv-bench --bin kv-step --bin counter-bench --bin pingpong
echo "bench/run.sh: building the Go go-plugin peers" >&2
bash tests/go/build.sh target/go-peers
exec target/release/tether-bench "$@"
