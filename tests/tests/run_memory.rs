//! `tether run` keeps its statistics in constant memory: over a long run the host's resident
//! memory stays flat (issue 16, item 13). Before, every step's latency was kept for the
//! percentiles and the host grew by ≈ 18 bytes a step (≈ 0.25 MiB over this test's run).
//!
//! Sized for CI: 15,000 one-step runs take 15–45 s in a debug build on a busy 2-core machine.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};

use tether_tests::bins;
use tether_tests::peers::repo_root;

/// Steps of the run: enough for the old per-step samples to show (≈ 210 KiB over the
/// measured 80%) while the test stays under a minute.
const STEPS: u64 = 15_000;

/// Resident memory the host may gain between 10% and 90% of the run: allocator and buffer
/// noise (measured: 8 KiB), well below what keeping a sample per step costs.
const RSS_TOLERANCE_KIB: u64 = 96;

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// `n` of a progress line `[n/total] step (plugin): message`.
fn progress_count(line: &str) -> Option<u64> {
    line.strip_prefix('[')?.split_once('/')?.0.parse().ok()
}

#[test]
fn a_long_run_keeps_the_hosts_resident_memory_flat() {
    let work = tempfile::tempdir().unwrap();
    let workflow = work.path().join("one-step.toml");
    std::fs::write(
        &workflow,
        "name = \"soak\"\n[[steps]]\nname = \"count\"\nplugin = \"word-count\"\nparams = { text = \"a b\" }\n",
    )
    .unwrap();
    let catalog = repo_root().join("examples/agent/catalog");
    let mut child = Command::new(bins::TETHER.path())
        .args(["run", "--catalog", catalog.to_str().unwrap()])
        .arg(&workflow)
        .args(["--repeat", &STEPS.to_string()])
        .current_dir(work.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();

    // Progress goes to a non-terminal stderr as a line every 10% of the run: measure there.
    let mut samples: Vec<(u64, u64)> = Vec::new();
    let mut stderr_text = String::new();
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(n) = progress_count(&line)
            && n % (STEPS / 10) == 0
            && n < STEPS
            && let Some(rss) = rss_kib(pid)
        {
            samples.push((n, rss));
        }
        stderr_text.push_str(&line);
        stderr_text.push('\n');
    }
    let out = child.wait_with_output().unwrap();
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stderr_text}");
    assert!(
        summary.contains(&format!("steps run: {STEPS} ")),
        "{summary}"
    );
    assert!(samples.len() >= 8, "progress marks seen: {samples:?}");

    let (first_n, first) = samples[0];
    let (last_n, last) = samples[samples.len() - 1];
    let grown = last.saturating_sub(first);
    eprintln!("host RSS {first} KiB at step {first_n}, {last} KiB at step {last_n}: +{grown} KiB");
    assert!(
        grown <= RSS_TOLERANCE_KIB,
        "the host grew by {grown} KiB over {} steps (samples: {samples:?})",
        last_n - first_n
    );
}
