#!/usr/bin/env bash
# Smoke check of the receivers tests/otel/build.sh built into OUTDIR: the collector takes one span
# over OTLP/HTTP and writes it to its file, and promcheck lints and parses an exposition.
# Usage: tests/otel/smoke.sh OUTDIR   (CI runs it right after the build)
set -euo pipefail
die() { echo "tests/otel/smoke.sh: error: $*" >&2; exit 1; }
[[ $# -eq 1 ]] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=$(cd "$1" && pwd)
work=$(mktemp -d)
collector=
cleanup() {
	[[ -n $collector ]] && kill "$collector" 2>/dev/null && wait "$collector" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

# Two free loopback ports (the kernel's choice; the collector binds them right after).
read -r grpc_port http_port < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))')
export TETHER_OTELCOL_GRPC=127.0.0.1:$grpc_port TETHER_OTELCOL_HTTP=127.0.0.1:$http_port TETHER_OTELCOL_OUT=$work
mkfifo "$work/log"
"$OUT/otelcol" --config "$SRC/otelcol.yaml" 2>"$work/log" &
collector=$!
exec 3<"$work/log"
# The collector says when it listens: read its log until then (or until it exits), then keep
# draining it so it never blocks on a full pipe (nor dies writing to a closed one).
while IFS= read -r -u 3 line; do
	[[ $line == *"Everything is ready"* ]] && break
done || true
cat <&3 >/dev/null &
kill -0 "$collector" 2>/dev/null || die "the collector exited before it was ready"

trace_id=5b8efff798038103d269b633813fc60c
python3 - "$TETHER_OTELCOL_HTTP" "$trace_id" <<'PY' ||
import json, sys, urllib.request
endpoint, trace_id = sys.argv[1:]
span = {"traceId": trace_id, "spanId": "eee19b7ec3c1b174", "name": "smoke", "kind": 2,
        "startTimeUnixNano": "1", "endTimeUnixNano": "2"}
body = {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "smoke"}}]},
                           "scopeSpans": [{"spans": [span]}]}]}
request = urllib.request.Request(f"http://{endpoint}/v1/traces", json.dumps(body).encode(),
                                 {"content-type": "application/json"})
urllib.request.urlopen(request, timeout=10).read()
PY
	die "the collector refused an OTLP/HTTP export"
for _ in $(seq 100); do
	grep -q "$trace_id" "$work/traces.jsonl" 2>/dev/null && break
	sleep 0.1
done
grep -q "$trace_id" "$work/traces.jsonl" || die "the span did not reach $work/traces.jsonl within 10 s"

printf '# HELP smoke_calls_total Calls.\n# TYPE smoke_calls_total counter\nsmoke_calls_total{method="Get"} 3\n' |
	"$OUT/promcheck" | grep -q '"name":"smoke_calls_total","labels":{"method":"Get"},"value":"3"' ||
	die "promcheck did not print the sample"
echo "tests/otel/smoke.sh: the collector received a span over OTLP/HTTP; promcheck parsed a sample" >&2
