//! A plugin cannot flood its host's log with one warning line per message it sends (issue 22,
//! "also seen": 19,000 lines for a flood of 20,000 broker ids): a real plugin announces
//! thousands of broker ids nobody claims, and `tether` logs one line per interval, each
//! counting the ones it did not show, and one at the end for the rest.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::process::Command;
use std::time::Instant;

use tether_tests::bins;
use tether_tests::host_user::root_and_unprivileged;
use tether_transport::{DEFAULT_REPEATED_WARNING_INTERVAL, MAX_UNCLAIMED};

const HOSTILE: &str = env!("CARGO_BIN_EXE_hostile-plugin");
/// Broker ids the plugin announces: well past the table's limit of 1,024 (20,000 in the issue:
/// the same few lines, each counting more).
const FLOOD: u64 = 5_000;
const WARNING: &str = "too many unclaimed broker ids; dropping this one";

/// How many dropped ids `line` stands for: itself, plus the `N` of "(and N more …)" or
/// "… and N more:".
fn counted(line: &str) -> u64 {
    let held = line
        .split("and ")
        .nth(1)
        .and_then(|rest| rest.split(" more").next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    let summary = line.contains("… and ");
    held + u64::from(!summary)
}

#[test]
fn a_flood_of_broker_ids_makes_one_warning_line_per_interval_that_counts_the_rest() {
    let _both = root_and_unprivileged(
        "a_flood_of_broker_ids_makes_one_warning_line_per_interval_that_counts_the_rest",
    );
    let started = Instant::now();
    let output = Command::new(bins::TETHER.path())
        .args(["call", "--cmd", HOSTILE, "--cookie", "BASIC_PLUGIN=hello"])
        .args([
            "proto.KV/Put",
            &format!(r#"{{"key":"broker-flood:{FLOOD}"}}"#),
        ])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains(WARNING)).collect();
    let dropped: u64 = lines.iter().map(|l| counted(l)).sum();
    eprintln!(
        "{FLOOD} broker ids in {took:?}: {} warning lines for {dropped} dropped ids:\n{}",
        lines.len(),
        lines.join("\n")
    );
    // One line per interval the flood lasted, and one summary at the end.
    let intervals = took.as_secs() / DEFAULT_REPEATED_WARNING_INTERVAL.as_secs() + 1;
    assert!(
        !lines.is_empty() && lines.len() as u64 <= intervals + 1,
        "{} lines in {took:?}:\n{stderr}",
        lines.len()
    );
    // Every id past the table's limit was counted (fewer when slow: unclaimed ids expire).
    assert!(
        dropped > 0 && dropped <= FLOOD - MAX_UNCLAIMED as u64,
        "{dropped}"
    );
    assert!(
        lines.len() == 1 || lines.iter().any(|l| l.contains("more")),
        "the held-back warnings are never counted:\n{stderr}"
    );
}
