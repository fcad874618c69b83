//! The host's memory and output stay bounded whatever a plugin streams (issue 22, hole 8): a
//! real plugin answers `tether call` of a server-streaming method with 1 MiB messages — a
//! gigabyte of them, an endless stream, a stream that stalls — and the tests watch the
//! `tether` process's peak resident memory, what reaches its stdout and when.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::io::{BufRead as _, BufReader, Read as _};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tether_tests::bins;
use tether_tests::host_user::root_and_unprivileged;

const HOSTILE: &str = env!("CARGO_BIN_EXE_hostile-plugin");
/// What one chunk of the plugin's `FetchArtifact` stream holds.
const CHUNK_BYTES: u64 = 1 << 20;
/// The most resident memory `tether` may reach while it streams: its own code and libraries,
/// HTTP/2 flow-control windows and a few messages in flight — not the stream.
const MAX_PEAK_RSS_MIB: u64 = 64;
/// How often the peak is read while the stream runs (it is the kernel's high-water mark, so
/// the last read before the end sees every peak before it).
const RSS_SAMPLE_EVERY: Duration = Duration::from_millis(50);

/// `tether call` of the hostile plugin's `FetchArtifact` for artifact `name`, with `flags`;
/// stdout and stderr piped.
fn fetch(name: &str, flags: &[&str]) -> Child {
    let request = format!(r#"{{"name":"{name}"}}"#);
    Command::new(bins::TETHER.path())
        .args(["call", "--cmd", HOSTILE, "--cookie", "BASIC_PLUGIN=hello"])
        .args(flags)
        .args(["tether.agent.v1.Host/FetchArtifact", &request])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `VmHWM` (peak resident set) of `pid`, in KiB; `None` once it has exited.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Reads `pid`'s peak resident memory every [`RSS_SAMPLE_EVERY`] until `done`; returns the
/// largest value seen, in KiB.
fn watch_peak_rss(pid: u32, done: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut peak = 0;
        while !done.load(Ordering::Relaxed) {
            match peak_rss_kib(pid) {
                Some(kib) => peak = peak.max(kib),
                None => break,
            }
            std::thread::sleep(RSS_SAMPLE_EVERY);
        }
        peak
    })
}

/// Reads `child`'s stderr to its end on a thread.
fn stderr_of(child: &mut Child) -> std::thread::JoinHandle<String> {
    let mut stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    })
}

/// How many 1 MiB responses the bounded-memory test streams: far more than the bound, so a
/// host that kept them would fail; not a gigabyte, which a debug build on a loaded 2-core
/// machine prints at about 10 MiB/s (base64 in JSON: 1.33 bytes printed per byte streamed).
const STREAMED_MIB: u64 = 192;

#[test]
fn tether_call_streams_hundreds_of_megabytes_in_bounded_memory_printing_each_as_it_arrives() {
    let _both = root_and_unprivileged(
        "tether_call_streams_hundreds_of_megabytes_in_bounded_memory_printing_each_as_it_arrives",
    );
    let chunks = STREAMED_MIB;
    let mut child = fetch(
        &format!("flood:{chunks}"),
        &["--max-bytes", "1GiB", "--max-time", "30m"],
    );
    let pid = child.id();
    let done = Arc::new(AtomicBool::new(false));
    let peak = watch_peak_rss(pid, done.clone());
    let stderr = stderr_of(&mut child);
    let started = Instant::now();
    let mut stdout = BufReader::with_capacity(4 << 20, child.stdout.take().unwrap());
    let (mut lines, mut bytes, mut line) = (0_u64, 0_u64, Vec::new());
    while stdout.read_until(b'\n', &mut line).unwrap() > 0 {
        let text = std::str::from_utf8(&line).unwrap();
        assert!(
            text.starts_with(r#"{"data":"eHh4"#) && text.ends_with("\"}\n"),
            "line {lines}: {:?}…",
            &text[..text.len().min(80)]
        );
        lines += 1;
        bytes += line.len() as u64;
        line.clear();
    }
    let status = child.wait().unwrap();
    done.store(true, Ordering::Relaxed);
    let peak_mib = peak.join().unwrap() / 1024;
    let stderr = stderr.join().unwrap();
    eprintln!(
        "streamed {chunks} MiB ({bytes} bytes of JSON lines) in {:?}; tether's peak RSS {peak_mib} MiB",
        started.elapsed()
    );
    assert!(status.success(), "tether ended with {status}:\n{stderr}");
    assert_eq!(lines, chunks, "{stderr}");
    assert!(bytes > chunks * CHUNK_BYTES, "{bytes}");
    assert!(
        peak_mib < MAX_PEAK_RSS_MIB,
        "tether's resident memory reached {peak_mib} MiB while streaming {chunks} MiB (limit {MAX_PEAK_RSS_MIB} MiB)"
    );
}

#[test]
fn a_stream_that_never_ends_is_cut_at_the_byte_cap_and_the_plugin_is_shut_down() {
    let _both = root_and_unprivileged(
        "a_stream_that_never_ends_is_cut_at_the_byte_cap_and_the_plugin_is_shut_down",
    );
    let mut child = fetch("flood:0", &["--max-bytes", "10MiB"]);
    let stderr = stderr_of(&mut child);
    let mut stdout = Vec::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    let status = child.wait().unwrap();
    let stderr = stderr.join().unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stdout.len() <= 10 << 20, "{} bytes printed", stdout.len());
    let lines = stdout.iter().filter(|&&b| b == b'\n').count();
    assert_eq!(
        lines, 7,
        "1 MiB is 1.33 MiB of base64: 7 lines fit in 10 MiB"
    );
    assert!(
        stderr.contains(
            "answered more than 10MiB of output (--max-bytes); cancelled after 7 response(s)"
        ),
        "{stderr}"
    );
}

#[test]
fn a_stream_that_stalls_shows_what_arrived_at_once_and_ends_at_the_deadline() {
    let _both = root_and_unprivileged(
        "a_stream_that_stalls_shows_what_arrived_at_once_and_ends_at_the_deadline",
    );
    let max_time = "20s";
    let mut child = fetch("stall", &["--max-time", max_time]);
    let stderr = stderr_of(&mut child);
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    // The one chunk is shown while the call still runs, not kept until the stream ends.
    assert!(first.starts_with(r#"{"data":"eHh4"#), "{first:.80}");
    assert!(
        child.try_wait().unwrap().is_none(),
        "tether printed the first response only when it ended"
    );
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    let stderr = stderr.join().unwrap();
    assert_eq!(rest, "");
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "tether.agent.v1.Host/FetchArtifact took longer than {max_time} (--max-time); cancelled after 1 response(s)"
        )),
        "{stderr}"
    );
}
