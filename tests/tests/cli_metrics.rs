//! `tether run`'s metrics with the agent demo: its Prometheus endpoint's exposition lints clean
//! and parses with Prometheus's own code (`promcheck`), its OTLP export reaches a real
//! OpenTelemetry Collector, and both count the steps, starts and callbacks the run reports.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use tether_tests::bins;
use tether_tests::otel::{self, Collector, MetricValues};
use tether_tests::peers::repo_root;
use tether_tests::promcheck::{self, Checked};

/// How long the demo's run may take, to the line saying its final metrics are served.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// How long the collector may take to write the last export after the host exited.
const METRICS_ARRIVE_TIMEOUT: Duration = Duration::from_secs(20);

const RUNS: usize = 2;

/// The number after `label` in `text` (`"plugins: "` → 5).
fn number_after(text: &str, label: &str) -> f64 {
    let at = text
        .find(label)
        .unwrap_or_else(|| panic!("no {label:?} in {text}"));
    let digits: String = text[at + label.len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

/// The number before `label` in `text` (`" artifact fetches"` → 2).
fn number_before(text: &str, label: &str) -> f64 {
    let at = text
        .find(label)
        .unwrap_or_else(|| panic!("no {label:?} in {text}"));
    let digits: String = text[..at]
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.chars().rev().collect::<String>().parse().unwrap()
}

/// The sum of the Prometheus samples `name` whose `label` starts with `prefix`.
fn prometheus_sum(checked: &Checked, name: &str, label: &str, prefix: &str) -> f64 {
    checked
        .samples
        .iter()
        .filter(|s| s.name == name && s.labels.get(label).is_some_and(|v| v.starts_with(prefix)))
        .map(|s| s.value)
        .sum()
}

/// The sum of the OTLP series `name` whose attribute `key` starts with `prefix`.
fn otlp_sum(values: &MetricValues, name: &str, key: &str, prefix: &str) -> f64 {
    values
        .iter()
        .filter(|((n, attributes), _)| {
            n == name
                && attributes
                    .iter()
                    .any(|(k, v)| k == key && v.starts_with(prefix))
        })
        .map(|(_, v)| v)
        .sum()
}

#[test]
fn tether_run_serves_its_plugins_metrics_to_prometheus_and_exports_the_same_counts_over_otlp() {
    let Some(tools) = otel::tools_or_skip(
        "tether_run_serves_its_plugins_metrics_to_prometheus_and_exports_the_same_counts_over_otlp",
    ) else {
        return;
    };
    bins::AGENT_DEMO.path();
    let collector = Collector::start(&tools);
    let demo = repo_root().join("examples/agent");
    let work = tempfile::tempdir().unwrap();
    let state = work.path().join("state");
    let mut child = Command::new(bins::TETHER.path())
        .args([
            "run",
            "--repeat",
            &RUNS.to_string(),
            "--state-dir",
            state.to_str().unwrap(),
            "--metrics-listen",
            "127.0.0.1:0",
            "--metrics-linger",
            "10m",
            "--otlp-metrics",
        ])
        .env("TETHER_CATALOG", demo.join("catalog"))
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://{}", collector.grpc),
        )
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .current_dir(work.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, stderr) = mpsc::channel();
    let pipe = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let mut log = String::new();
    let mut endpoint = None;
    loop {
        let line = stderr
            .recv_timeout(RUN_TIMEOUT)
            .unwrap_or_else(|e| panic!("tether run did not reach its final metrics ({e}):\n{log}"));
        log.push_str(&line);
        log.push('\n');
        if let Some(url) = line.strip_prefix("tether: serving metrics at ") {
            endpoint = Some(url.to_owned());
        }
        if line.contains("serving its final metrics") {
            break;
        }
    }
    let endpoint = endpoint.unwrap_or_else(|| panic!("no endpoint announced:\n{log}"));
    // curl: a real HTTP client, as a scraper's.
    let scraped = Command::new("curl")
        .args(["--silent", "--show-error", "--fail", &endpoint])
        .output()
        .unwrap();
    assert!(scraped.status.success(), "{scraped:?}");
    let text = String::from_utf8(scraped.stdout).unwrap();
    let prometheus = promcheck::check(&tools, &text);
    assert_eq!(
        prometheus.status,
        Some(0),
        "promcheck refused the exposition:\n{}\n{text}",
        prometheus.stderr
    );

    rustix::process::kill_process(
        rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{report}\n{log}");

    let workflow = std::fs::read_to_string(demo.join("workflow.toml")).unwrap();
    // Each run's steps, plus the call the host relays for the checksum step to the plugin its
    // `confirm_with` names (a plugin-to-plugin call, docs/PROTOCOL.md §10.3): the host makes
    // that call to the plugin too, and measures it as such.
    let relayed = workflow.matches("confirm_with = ").count();
    let calls = ((workflow.matches("[[steps]]").count() + relayed) * RUNS) as f64;
    let started = number_after(&report, "plugins: ");
    let fetches = number_before(&report, " artifact fetches");
    let executor = "tether.agent.v1.Executor/";
    let fetch = "tether.agent.v1.Host/FetchArtifact";

    let client = "rpc_client_call_duration_seconds_count";
    let server = "rpc_server_call_duration_seconds_count";
    assert_eq!(
        prometheus_sum(&prometheus, client, "rpc_method", executor),
        calls,
        "{text}"
    );
    assert_eq!(
        prometheus_sum(
            &prometheus,
            "tether_plugin_starts_total",
            "tether_plugin_start_outcome",
            "success"
        ),
        started,
        "{report}\n{text}"
    );
    assert!(fetches >= 1.0, "{report}");
    assert_eq!(
        prometheus_sum(&prometheus, server, "rpc_method", fetch),
        fetches,
        "{report}\n{text}"
    );
    let callbacks = prometheus_sum(&prometheus, server, "rpc_method", "");

    let otlp = collector.wait_for_metrics(METRICS_ARRIVE_TIMEOUT, |values| {
        otlp_sum(values, "rpc.client.call.duration", "rpc.method", executor) == calls
    });
    assert_eq!(
        otlp_sum(
            &otlp,
            "rpc.client.call.duration",
            "rpc.response.status_code",
            "OK"
        ),
        calls,
        "every step's call succeeded: {otlp:#?}"
    );
    assert_eq!(
        otlp_sum(
            &otlp,
            "tether.plugin.starts",
            "tether.plugin.start.outcome",
            "success"
        ),
        started,
        "{otlp:#?}"
    );
    assert_eq!(
        otlp_sum(&otlp, "rpc.server.call.duration", "rpc.method", fetch),
        fetches,
        "{otlp:#?}"
    );
    assert_eq!(
        otlp_sum(&otlp, "rpc.server.call.duration", "rpc.method", ""),
        callbacks,
        "the same callbacks both ways: {otlp:#?}\n{text}"
    );
}
