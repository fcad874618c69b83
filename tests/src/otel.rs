//! The real telemetry receivers of `tests/otel/` (an OpenTelemetry Collector built by `ocb`,
//! `promcheck`), built once per test process, and a running collector whose file exporter the
//! tests read back.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::peers::{REQUIRE_PEERS_ENV, peers_required, repo_root};
use crate::procs::target_profile_dir;

/// How long the collector may take to say it is ready.
const COLLECTOR_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The last value of every metric series the collector received, keyed by the metric's name
/// and its data point's attributes (sorted): [`Collector::metric_values`].
pub type MetricValues = BTreeMap<(String, Vec<(String, String)>), f64>;

/// The binaries `tests/otel/build.sh` built.
#[derive(Debug, Clone)]
pub struct OtelTools {
    /// The OpenTelemetry Collector (OTLP in, OTLP JSON files out).
    pub otelcol: PathBuf,
    /// `promcheck`: promlint and Prometheus's scrape parser.
    pub promcheck: PathBuf,
}

/// Builds (once per process) and returns the receivers, or why they are unavailable.
///
/// # Errors
/// What failed, to print when skipping.
pub fn tools() -> Result<OtelTools, String> {
    static TOOLS: OnceLock<Result<OtelTools, String>> = OnceLock::new();
    TOOLS.get_or_init(build).clone()
}

/// Like [`tools`], but when they are unavailable: panics if [`peers_required`], else prints why
/// and returns `None`.
#[must_use]
pub fn tools_or_skip(test: &str) -> Option<OtelTools> {
    match tools() {
        Ok(tools) => Some(tools),
        Err(why) if peers_required() => {
            panic!("{test}: telemetry receivers unavailable and {REQUIRE_PEERS_ENV}=1: {why}")
        }
        Err(why) => {
            eprintln!("SKIPPED {test}: telemetry receivers unavailable: {why}");
            None
        }
    }
}

fn build() -> Result<OtelTools, String> {
    let out = target_profile_dir()
        .parent()
        .map(|target| target.join("otel-tools"))
        .ok_or("cannot locate the cargo target directory")?;
    std::fs::create_dir_all(&out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let script = repo_root().join("tests/otel/build.sh");
    let output = Command::new("bash")
        .arg(&script)
        .arg(&out)
        .output()
        .map_err(|e| format!("running {}: {e}", script.display()))?;
    if !output.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            script.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(OtelTools {
        otelcol: out.join("otelcol"),
        promcheck: out.join("promcheck"),
    })
}

/// A running collector on two free loopback ports, writing what it receives into a temporary
/// directory. Killed when dropped.
#[derive(Debug)]
pub struct Collector {
    child: Child,
    /// `127.0.0.1:port` of its OTLP/gRPC receiver.
    pub grpc: String,
    /// `127.0.0.1:port` of its OTLP/HTTP receiver.
    pub http: String,
    out: tempfile::TempDir,
}

impl Collector {
    /// Starts the collector and waits for its "Everything is ready" line.
    ///
    /// # Panics
    /// When it cannot start or does not become ready.
    #[must_use]
    pub fn start(tools: &OtelTools) -> Self {
        let out = tempfile::tempdir().expect("a temporary directory");
        let [grpc, http] = free_ports();
        let config = repo_root().join("tests/otel/otelcol.yaml");
        let mut child = Command::new(&tools.otelcol)
            .arg("--config")
            .arg(&config)
            .env("TETHER_OTELCOL_GRPC", &grpc)
            .env("TETHER_OTELCOL_HTTP", &http)
            .env("TETHER_OTELCOL_OUT", out.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the collector starts");
        let stderr = child.stderr.take().expect("piped stderr");
        let (ready_tx, ready_rx) = mpsc::channel();
        // Reads its log until it is ready, then keeps draining it (a full pipe would block it).
        std::thread::spawn(move || {
            let mut log = Vec::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("Everything is ready") {
                    let _ = ready_tx.send(Ok(()));
                } else if log.len() < 200 {
                    log.push(line);
                }
            }
            let _ = ready_tx.send(Err(log.join("\n")));
        });
        match ready_rx.recv_timeout(COLLECTOR_READY_TIMEOUT) {
            Ok(Ok(())) => {}
            Ok(Err(log)) => panic!("the collector exited before it was ready:\n{log}"),
            Err(_) => panic!("the collector was not ready within {COLLECTOR_READY_TIMEOUT:?}"),
        }
        Self {
            child,
            grpc,
            http,
            out,
        }
    }

    /// Where it writes (`traces.jsonl`, `metrics.jsonl`).
    #[must_use]
    pub fn out(&self) -> &Path {
        self.out.path()
    }

    /// Every span received so far, flattened out of the OTLP JSON export requests, with its
    /// resource's attributes.
    #[must_use]
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        let Ok(text) = std::fs::read_to_string(self.out.path().join("traces.jsonl")) else {
            return Vec::new();
        };
        let mut spans = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            // The file exporter flushes whole lines; a partial last line is read next time.
            let Ok(request) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            for resource in request["resourceSpans"].as_array().into_iter().flatten() {
                let resource_attributes = attributes(&resource["resource"]["attributes"]);
                for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
                    for span in scope["spans"].as_array().into_iter().flatten() {
                        spans.push(ReceivedSpan {
                            trace_id: text_of(&span["traceId"]),
                            span_id: text_of(&span["spanId"]),
                            parent_span_id: text_of(&span["parentSpanId"]),
                            name: text_of(&span["name"]),
                            kind: span["kind"].as_u64().unwrap_or(0),
                            attributes: attributes(&span["attributes"]),
                            resource: resource_attributes.clone(),
                        });
                    }
                }
            }
        }
        spans
    }

    /// Waits (at most `timeout`) until `done` holds for the spans received, and returns them.
    ///
    /// # Panics
    /// When it does not hold in time, with the spans received.
    pub fn wait_for_spans(
        &self,
        timeout: Duration,
        done: impl Fn(&[ReceivedSpan]) -> bool,
    ) -> Vec<ReceivedSpan> {
        let deadline = Instant::now() + timeout;
        loop {
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            assert!(
                Instant::now() < deadline,
                "the collector did not receive the expected spans within {timeout:?}; it has:\n{}",
                tree(&spans)
            );
            // The file exporter flushes every 100 ms (tests/otel/otelcol.yaml): no event to wait on.
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Collector {
    /// The last value the collector received of every metric series: a histogram's count, a
    /// sum's or gauge's value, keyed by the metric's name and its data point's attributes
    /// (sorted). Cumulative series: the last export holds the final values.
    #[must_use]
    pub fn metric_values(&self) -> MetricValues {
        let mut values = BTreeMap::new();
        let Ok(text) = std::fs::read_to_string(self.out.path().join("metrics.jsonl")) else {
            return values;
        };
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let Ok(request) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            for resource in request["resourceMetrics"].as_array().into_iter().flatten() {
                for scope in resource["scopeMetrics"].as_array().into_iter().flatten() {
                    for metric in scope["metrics"].as_array().into_iter().flatten() {
                        let name = text_of(&metric["name"]);
                        for (kind, field) in [
                            ("histogram", "count"),
                            ("sum", "asInt"),
                            ("sum", "asDouble"),
                            ("gauge", "asInt"),
                            ("gauge", "asDouble"),
                        ] {
                            for point in metric[kind]["dataPoints"].as_array().into_iter().flatten()
                            {
                                let Some(value) = number(&point[field]) else {
                                    continue;
                                };
                                let mut labels = attributes(&point["attributes"]);
                                labels.sort();
                                values.insert((name.clone(), labels), value);
                            }
                        }
                    }
                }
            }
        }
        values
    }

    /// Waits (at most `timeout`) until `done` holds for [`metric_values`](Self::metric_values),
    /// and returns them.
    ///
    /// # Panics
    /// When it does not hold in time, with the values received.
    pub fn wait_for_metrics(
        &self,
        timeout: Duration,
        done: impl Fn(&MetricValues) -> bool,
    ) -> MetricValues {
        let deadline = Instant::now() + timeout;
        loop {
            let values = self.metric_values();
            if done(&values) {
                return values;
            }
            assert!(
                Instant::now() < deadline,
                "the collector did not receive the expected metrics within {timeout:?}; it has:\n{values:#?}"
            );
            // The file exporter flushes every 100 ms (tests/otel/otelcol.yaml): no event to wait on.
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// An OTLP JSON number: a 64-bit integer is a string, a double a number.
fn number(value: &Value) -> Option<f64> {
    value
        .as_f64()
        .or_else(|| value.as_str().and_then(|s| s.parse().ok()))
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One span as the collector received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedSpan {
    /// Hex trace id.
    pub trace_id: String,
    /// Hex span id.
    pub span_id: String,
    /// Hex parent span id (empty for a root).
    pub parent_span_id: String,
    /// Its name.
    pub name: String,
    /// OTLP span kind: 1 internal, 2 server, 3 client.
    pub kind: u64,
    /// Its attributes, values as text.
    pub attributes: Vec<(String, String)>,
    /// Its resource's attributes, values as text.
    pub resource: Vec<(String, String)>,
}

impl ReceivedSpan {
    /// The value of attribute `key`.
    #[must_use]
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The value of resource attribute `key`.
    #[must_use]
    pub fn resource_attribute(&self, key: &str) -> Option<&str> {
        self.resource
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The spans as an indented tree per trace (for failure messages and the closing note).
#[must_use]
pub fn tree(spans: &[ReceivedSpan]) -> String {
    fn line(span: &ReceivedSpan, depth: usize, out: &mut String) {
        let service = span.resource_attribute("service.name").unwrap_or("?");
        out.push_str(&format!(
            "{}{} [{service}] kind={} trace={} span={}\n",
            "  ".repeat(depth),
            span.name,
            span.kind,
            span.trace_id,
            span.span_id
        ));
    }
    fn walk(spans: &[ReceivedSpan], parent: &ReceivedSpan, depth: usize, out: &mut String) {
        for child in spans
            .iter()
            .filter(|s| s.parent_span_id == parent.span_id && s.trace_id == parent.trace_id)
        {
            line(child, depth, out);
            walk(spans, child, depth + 1, out);
        }
    }
    let ids: std::collections::BTreeSet<_> = spans.iter().map(|s| s.span_id.as_str()).collect();
    let mut out = String::new();
    for root in spans
        .iter()
        .filter(|s| s.parent_span_id.is_empty() || !ids.contains(s.parent_span_id.as_str()))
    {
        line(root, 0, &mut out);
        walk(spans, root, 1, &mut out);
    }
    out
}

fn text_of(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

fn attributes(list: &Value) -> Vec<(String, String)> {
    list.as_array()
        .into_iter()
        .flatten()
        .map(|kv| {
            let value = &kv["value"];
            let text = value
                .as_object()
                .and_then(|o| o.values().next())
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                .unwrap_or_default();
            (text_of(&kv["key"]), text)
        })
        .collect()
}

/// Two free loopback ports (the kernel's choice; the collector binds them right after).
fn free_ports() -> [String; 2] {
    let listeners = [0, 1].map(|_| TcpListener::bind("127.0.0.1:0").expect("a free port"));
    listeners.map(|l| l.local_addr().expect("bound").to_string())
}
