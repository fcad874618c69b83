//! Reading a plugin's stdout up to its handshake line, with bounded memory.
//!
//! [`LineReader`] never holds more than its limit of one line; [`StrayOutput`] decides what to do
//! with lines before the handshake (log and skip, within limits); [`read_handshake`] puts the
//! two together. None of that knows about processes, so it is tested over in-memory readers.
//! [`stage`] is the launch stage around it: the start timeout, the plugin's exit, the check of
//! the line against what the host offered, and the mapping of every failure to its start error.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use crate::launch::runner::process::spawn::PluginPipe;
use tether_proto::handshake::{self, Handshake, HandshakeError, MAX_LINE_LEN};
use tether_proto::text::escape;
use tokio::io::AsyncRead;

use crate::launch::error::{Failure, Incompatibility, OutputLimit, Phase, StartErrorKind};
use crate::launch::launched::Launched;
use crate::launch::output::{self, Line, LineReader};
use crate::launch::settings::{HandshakeConfig, Settings};

/// At most this many bytes of stdout are quoted in an error message.
pub const MAX_QUOTED_STDOUT: usize = 1024;

/// At most this many bytes of a plugin's first stray stdout line are quoted in the sentence of
/// [`StartErrorKind::SilentAfterStray`] (all of its stdout, up to [`MAX_QUOTED_STDOUT`], ends
/// the message).
pub const MAX_QUOTED_STRAY_LINE: usize = 200;

/// When stdout ends, how long to wait for the plugin's exit before reporting the closed stdout
/// itself rather than the exit.
pub(crate) const EXIT_SETTLE_TIMEOUT: Duration = Duration::from_millis(500);

/// Why stray output made the handshake fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StrayLimit {
    /// More than this many lines.
    Lines(usize),
    /// More than this many bytes.
    Bytes(usize),
}

/// Whether a stdout line before the handshake is the handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// It looks like a handshake: parse it.
    Handshake,
    /// Stray output: log it and read on.
    Stray,
}

/// The policy for stdout lines before the handshake: skip lines that do not look like one,
/// up to a number of lines and bytes, and remember the first of them for error messages.
#[derive(Debug)]
pub(crate) struct StrayOutput {
    max_lines: usize,
    max_bytes: usize,
    lines: usize,
    bytes: usize,
    quoted: Vec<u8>,
    quoted_cut: usize,
    overlong: bool,
    /// The first stray line, truncated to [`MAX_QUOTED_STRAY_LINE`] bytes.
    first: Option<String>,
}

impl StrayOutput {
    pub(crate) fn new(max_lines: usize, max_bytes: usize) -> Self {
        Self {
            max_lines,
            max_bytes,
            lines: 0,
            bytes: 0,
            quoted: Vec::new(),
            quoted_cut: 0,
            overlong: false,
            first: None,
        }
    }

    /// Classifies one complete line, counting it against the limits if it is stray.
    pub(crate) fn classify(&mut self, line: &[u8]) -> Result<Verdict, StrayLimit> {
        self.remember(line);
        if handshake::looks_like_handshake(line) {
            return Ok(Verdict::Handshake);
        }
        self.lines += 1;
        self.bytes += line.len() + 1;
        if self.first.is_none() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            self.first = Some(handshake::quote_truncated(line, MAX_QUOTED_STRAY_LINE));
        }
        if self.lines > self.max_lines {
            return Err(StrayLimit::Lines(self.max_lines));
        }
        if self.bytes > self.max_bytes {
            return Err(StrayLimit::Bytes(self.max_bytes));
        }
        Ok(Verdict::Stray)
    }

    /// Notes output for [`Self::printed`] without classifying it (e.g. an overlong line).
    pub(crate) fn remember(&mut self, bytes: &[u8]) {
        let room = MAX_QUOTED_STDOUT.saturating_sub(self.quoted.len());
        let take = bytes.len().min(room);
        self.quoted.extend_from_slice(&bytes[..take]);
        self.quoted_cut += bytes.len() - take;
        if self.quoted.len() < MAX_QUOTED_STDOUT {
            self.quoted.push(b'\n');
        }
    }

    /// Notes the start of a line that exceeded the line limit.
    pub(crate) fn remember_overlong(&mut self, start: &[u8]) {
        self.remember(start);
        self.overlong = true;
    }

    /// What the plugin printed on stdout so far, truncated to [`MAX_QUOTED_STDOUT`] bytes.
    pub(crate) fn printed(&self) -> String {
        let text = String::from_utf8_lossy(&self.quoted);
        let text = text.trim_end_matches('\n');
        let mut printed = if self.quoted_cut == 0 {
            text.to_owned()
        } else {
            format!("{text}… ({} more bytes)", self.quoted_cut)
        };
        if self.overlong {
            printed.push_str("… (and more of the same line)");
        }
        printed
    }
}

/// How reading the handshake failed (timeouts and exits are the caller's business).
#[derive(Debug)]
pub(crate) enum ReadFailure {
    /// stdout ended without a handshake line.
    Eof,
    /// Reading stdout failed.
    Io(io::Error),
    /// A line longer than the handshake maximum.
    LineTooLong,
    /// Too much stray output.
    TooMuchStray(StrayLimit),
    /// Stray lines, then no line within the after-stray timeout.
    SilentAfterStray {
        /// The first stray line, truncated.
        first_line: String,
        /// How many stray lines.
        lines: usize,
    },
    /// A line that looks like a handshake but is not a valid one.
    Malformed {
        /// The line, quoted and truncated.
        line: String,
        /// What is wrong with it.
        error: HandshakeError,
    },
}

/// Reads stdout until a handshake line, logging stray lines (with `plugin` as a field) and
/// skipping them within `stray`'s limits; after the first stray line, waits at most
/// `after_stray` (when given) for the handshake.
pub(crate) async fn read_handshake<R: AsyncRead + Unpin>(
    reader: &mut LineReader<R>,
    stray: &mut StrayOutput,
    plugin: &str,
    after_stray: Option<Duration>,
) -> Result<Handshake, ReadFailure> {
    let mut deadline = None;
    loop {
        let next = match deadline {
            None => reader.next_line().await,
            Some(deadline) => match tokio::time::timeout_at(deadline, reader.next_line()).await {
                Ok(next) => next,
                Err(_) => {
                    return Err(ReadFailure::SilentAfterStray {
                        first_line: stray.first.clone().unwrap_or_default(),
                        lines: stray.lines,
                    });
                }
            },
        };
        let line = match next {
            Ok(Some(Line::Complete(line))) => line,
            Ok(Some(Line::Fragment(start))) => {
                stray.remember_overlong(&start);
                return Err(ReadFailure::LineTooLong);
            }
            Ok(None) => return Err(ReadFailure::Eof),
            Err(e) => return Err(ReadFailure::Io(e)),
        };
        match stray.classify(&line) {
            Ok(Verdict::Handshake) => {
                return Handshake::parse(&line).map_err(|error| ReadFailure::Malformed {
                    line: handshake::quote_truncated(&line, MAX_QUOTED_STDOUT),
                    error,
                });
            }
            Ok(Verdict::Stray) => {
                if deadline.is_none() {
                    deadline = after_stray.map(|d| tokio::time::Instant::now() + d);
                }
                tracing::info!(
                    plugin,
                    line = %escape(String::from_utf8_lossy(&line).trim_end()),
                    "plugin printed a line before its handshake; skipping it"
                );
            }
            Err(limit) => return Err(ReadFailure::TooMuchStray(limit)),
        }
    }
}

/// What the handshake stage learned.
#[derive(Debug)]
pub(crate) struct Accepted {
    /// The parsed handshake line.
    pub(crate) handshake: Handshake,
    /// The plugin's certificate (DER), when AutoMTLS is on.
    pub(crate) peer_cert: Option<Vec<u8>>,
}

/// The handshake stage: the first line on stdout that looks like a handshake, within the start
/// timeout, checked against what the host offered. The rest of stdout is drained from then on.
pub(crate) async fn stage(
    settings: &Settings,
    config: &HandshakeConfig,
    launched: &Launched,
    stdout: PluginPipe,
    stray: &mut StrayOutput,
) -> Result<Accepted, Failure> {
    let plugin = &*launched.plugin;
    let group = &launched.group;
    // +1: a `\r` before the newline.
    let mut reader = LineReader::new(stdout, MAX_LINE_LEN + 1);
    // A Pod's log stream is stdout and stderr mixed: its stray lines are most often logs.
    let after_stray = (!launched.view.is_remote()).then_some(settings.timeouts.after_stray);
    let read = tokio::select! {
        biased;
        read = read_handshake(&mut reader, stray, plugin, after_stray) => read,
        status = group.exited() => return Err(Failure::exited(Phase::Handshake, status)),
        () = tokio::time::sleep(settings.timeouts.start) => {
            return Err(StartErrorKind::Timeout { timeout: settings.timeouts.start }.into());
        }
    };
    let hs = match read {
        Ok(hs) => hs,
        Err(failure) => return Err(read_failure(failure, settings, config, launched).await),
    };
    output::drain_stdout(
        reader,
        Arc::clone(&launched.plugin),
        group.pid(),
        settings.output_sink.clone(),
    );
    // A plugin elsewhere (a Pod) is always offered the multiplexed broker (`connect` says why).
    let offered_multiplex = settings.multiplex || launched.view.is_remote();
    let peer_cert =
        check(&hs, config, !settings.plaintext, offered_multiplex).map_err(|e| match e {
            None => Failure::new(StartErrorKind::NoAutoMtls),
            Some(reason) => incompatible(reason, config),
        })?;
    Ok(Accepted {
        handshake: hs,
        peer_cert,
    })
}

/// Checks a parsed handshake against what the host offered; returns the plugin's certificate.
/// `Err(None)`: TLS is on but the plugin sent no certificate.
///
/// Multiplexing: when offered, `true` turns it on and anything else (`false`, no field 7) keeps
/// the default mode — unlike go-plugin hosts, which refuse such plugins, tether falls back.
/// When not offered, `true` is refused: such a plugin would expect yamux on a connection that
/// does not carry it (go-plugin hosts ignore the field and then fail obscurely); `false` is
/// fine.
fn check(
    hs: &Handshake,
    config: &HandshakeConfig,
    tls: bool,
    offered_multiplex: bool,
) -> Result<Option<Vec<u8>>, Option<Incompatibility>> {
    if !config.app_versions.contains(&hs.app_version) {
        return Err(Some(Incompatibility::AppVersion {
            got: hs.app_version,
        }));
    }
    if hs.multiplex == Some(true) && !offered_multiplex {
        return Err(Some(Incompatibility::Multiplexing));
    }
    match (tls, &hs.server_cert) {
        (true, None) => Err(None),
        (false, Some(_)) => Err(Some(Incompatibility::UnrequestedTls)),
        (_, cert) => Ok(cert.clone()),
    }
}

fn incompatible(reason: Incompatibility, config: &HandshakeConfig) -> Failure {
    StartErrorKind::Incompatible {
        reason,
        offered: config.app_versions.clone(),
    }
    .into()
}

/// What a plugin prints when it refuses the cookie: the first sentence of go-plugin's message,
/// which every tether SDK prints too.
fn cookie_refusal_marker() -> &'static str {
    let message = tether_proto::env::NOT_LAUNCHED_BY_HOST_MESSAGE;
    message.split_inclusive('.').next().unwrap_or(message)
}

/// An exit before the handshake whose stderr says the plugin was not launched by its host is
/// [`StartErrorKind::CookieRefused`], naming the key `config` set; any other failure (a
/// panic, an exit with status 1 for another reason, garbage) stays what it was.
pub(crate) fn cookie_refused(failure: Failure, config: &HandshakeConfig, stderr: &str) -> Failure {
    match failure.kind {
        StartErrorKind::Exited { status } if stderr.contains(cookie_refusal_marker()) => Failure {
            phase: failure.phase,
            kind: StartErrorKind::CookieRefused {
                status,
                cookie_key: config.cookie.key.clone(),
            },
        },
        _ => failure,
    }
}

/// Maps a failed read to the start error it means: an exit (when the plugin exits soon after
/// its stdout closed), a closed stdout, too much output, or a malformed or incompatible line.
async fn read_failure(
    failure: ReadFailure,
    settings: &Settings,
    config: &HandshakeConfig,
    launched: &Launched,
) -> Failure {
    let too_much = |limit| StartErrorKind::TooMuchOutput { limit }.into();
    match failure {
        ReadFailure::SilentAfterStray { first_line, lines } => StartErrorKind::SilentAfterStray {
            first_line,
            lines,
            waited: settings.timeouts.after_stray,
        }
        .into(),
        ReadFailure::Eof | ReadFailure::Io(_) => {
            if let ReadFailure::Io(e) = &failure {
                tracing::debug!(plugin = %launched.plugin, error = %e, "reading the plugin's stdout failed");
            }
            match launched.group.exited_within(EXIT_SETTLE_TIMEOUT).await {
                Some(status) => Failure::exited(Phase::Handshake, status),
                None => StartErrorKind::StdoutClosed.into(),
            }
        }
        ReadFailure::LineTooLong => too_much(OutputLimit::LineLength(MAX_LINE_LEN)),
        ReadFailure::TooMuchStray(StrayLimit::Lines(n)) => too_much(OutputLimit::Lines(n)),
        ReadFailure::TooMuchStray(StrayLimit::Bytes(n)) => too_much(OutputLimit::Bytes(n)),
        ReadFailure::Malformed { line, error } => match error {
            HandshakeError::UnsupportedCoreVersion(got) => {
                incompatible(Incompatibility::CoreVersion { got }, config)
            }
            HandshakeError::UnsupportedProtocol(got) => {
                incompatible(Incompatibility::Protocol { got }, config)
            }
            error => StartErrorKind::Malformed { line, error }.into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use tether_proto::handshake::{Address, MAX_LINE_LEN, Protocol};

    use super::*;

    const HANDSHAKE: &[u8] = b"1|1|unix|/tmp/tether-abc/plugin1|grpc|\n";

    #[test]
    fn only_an_exit_saying_it_was_not_launched_by_its_host_is_a_refused_cookie() {
        use std::os::unix::process::ExitStatusExt as _;
        let config = HandshakeConfig::new("BASIC_PLUGIN", "hello");
        let exited = || Failure::exited(Phase::Handshake, std::process::ExitStatus::from_raw(256));
        let refusal = tether_proto::env::NOT_LAUNCHED_BY_HOST_MESSAGE;
        let refused = cookie_refused(exited(), &config, refusal);
        assert!(
            matches!(&refused.kind, StartErrorKind::CookieRefused { cookie_key, .. } if cookie_key == "BASIC_PLUGIN"),
            "{:?}",
            refused.kind
        );
        assert_eq!(refused.phase, Phase::Handshake);
        for stderr in [
            "",
            "fatal: no database",
            "thread 'main' panicked at src/main.rs",
        ] {
            let kept = cookie_refused(exited(), &config, stderr);
            assert!(
                matches!(kept.kind, StartErrorKind::Exited { .. }),
                "{stderr}"
            );
        }
        let timeout = StartErrorKind::Timeout {
            timeout: Duration::from_secs(1),
        };
        let kept = cookie_refused(timeout.into(), &config, refusal);
        assert!(matches!(kept.kind, StartErrorKind::Timeout { .. }));
    }

    #[tokio::test]
    async fn a_handshake_after_stray_lines_is_found() {
        let input = [b"starting up\n", b"banner v2\n" as &[u8], HANDSHAKE].concat();
        let mut reader = LineReader::new(&input[..], MAX_LINE_LEN + 1);
        let mut stray = StrayOutput::new(10, 1024);
        let hs = read_handshake(&mut reader, &mut stray, "p", None)
            .await
            .unwrap();
        assert_eq!(hs.address, Address::Unix("/tmp/tether-abc/plugin1".into()));
        assert!(
            stray
                .printed()
                .starts_with("starting up\nbanner v2\n1|1|unix")
        );
    }

    const AFTER_STRAY: Duration = Duration::from_secs(3);

    #[tokio::test(start_paused = true)]
    async fn stray_lines_then_silence_fail_after_the_after_stray_timeout_quoting_the_first() {
        use tokio::io::AsyncWriteExt as _;
        let (mut plugin, stdout) = tokio::io::duplex(1024);
        plugin
            .write_all(b"debug: \x1b[31mstarting\r\nsecond\n")
            .await
            .unwrap();
        let mut reader = LineReader::new(stdout, MAX_LINE_LEN + 1);
        let mut stray = StrayOutput::new(10, 1024);
        let began = tokio::time::Instant::now();
        let read = read_handshake(&mut reader, &mut stray, "p", Some(AFTER_STRAY)).await;
        match read {
            Err(ReadFailure::SilentAfterStray { first_line, lines }) => {
                assert_eq!((first_line.as_str(), lines), ("debug: \x1b[31mstarting", 2));
            }
            other => panic!("expected SilentAfterStray, got {other:?}"),
        }
        // Counted from the first stray line, which came at once.
        assert_eq!(began.elapsed(), AFTER_STRAY);
        drop(plugin);
    }

    #[tokio::test(start_paused = true)]
    async fn a_handshake_within_the_after_stray_timeout_of_a_stray_line_is_found() {
        use tokio::io::AsyncWriteExt as _;
        let (mut plugin, stdout) = tokio::io::duplex(1024);
        plugin.write_all(b"banner v2\n").await.unwrap();
        let mut reader = LineReader::new(stdout, MAX_LINE_LEN + 1);
        let mut stray = StrayOutput::new(10, 1024);
        // The plugin's own pace (virtual time): its handshake 2 s after its banner.
        let late = async {
            tokio::time::sleep(AFTER_STRAY - Duration::from_secs(1)).await;
            plugin.write_all(HANDSHAKE).await.unwrap();
            plugin
        };
        let (read, _plugin) = tokio::join!(
            read_handshake(&mut reader, &mut stray, "p", Some(AFTER_STRAY)),
            late
        );
        assert_eq!(
            read.unwrap().address,
            Address::Unix("/tmp/tether-abc/plugin1".into())
        );
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_stray_line_only_the_start_timeout_bounds_the_wait() {
        let (plugin, stdout) = tokio::io::duplex(1024);
        let mut reader = LineReader::new(stdout, MAX_LINE_LEN + 1);
        let mut stray = StrayOutput::new(10, 1024);
        let read = read_handshake(&mut reader, &mut stray, "p", Some(AFTER_STRAY));
        let waited = tokio::time::timeout(AFTER_STRAY * 20, read).await;
        assert!(waited.is_err(), "{waited:?}");
        drop(plugin);
    }

    #[tokio::test]
    async fn more_stray_lines_than_allowed_is_an_error() {
        let input = [b"a\nb\nc\n" as &[u8], HANDSHAKE].concat();
        let mut reader = LineReader::new(&input[..], 100);
        let mut stray = StrayOutput::new(2, 1024);
        assert!(matches!(
            read_handshake(&mut reader, &mut stray, "p", None).await,
            Err(ReadFailure::TooMuchStray(StrayLimit::Lines(2)))
        ));
    }

    #[tokio::test]
    async fn more_stray_bytes_than_allowed_is_an_error() {
        let input = [b"0123456789\n0123456789\n" as &[u8], HANDSHAKE].concat();
        let mut reader = LineReader::new(&input[..], 100);
        let mut stray = StrayOutput::new(100, 15);
        assert!(matches!(
            read_handshake(&mut reader, &mut stray, "p", None).await,
            Err(ReadFailure::TooMuchStray(StrayLimit::Bytes(15)))
        ));
    }

    #[tokio::test]
    async fn a_line_that_looks_like_a_handshake_but_is_invalid_is_malformed() {
        let mut reader = LineReader::new(&b"hello\n1|x|unix|/s|grpc|\n"[..], 100);
        let mut stray = StrayOutput::new(10, 1024);
        match read_handshake(&mut reader, &mut stray, "p", None).await {
            Err(ReadFailure::Malformed { line, error }) => {
                assert_eq!(line, "1|x|unix|/s|grpc|");
                assert_eq!(error, HandshakeError::InvalidAppVersion("x".into()));
            }
            other => panic!("expected Malformed, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn an_overlong_line_before_the_handshake_is_an_error_not_a_buffer() {
        let input = [vec![b'1'; 5000], b"\n".to_vec()].concat();
        let mut reader = LineReader::new(&input[..], 1000);
        let mut stray = StrayOutput::new(10, 100_000);
        assert!(matches!(
            read_handshake(&mut reader, &mut stray, "p", None).await,
            Err(ReadFailure::LineTooLong)
        ));
        assert!(stray.printed().ends_with("(and more of the same line)"));
    }

    #[tokio::test]
    async fn stdout_ending_before_a_handshake_is_eof() {
        let mut reader = LineReader::new(&b"just chatter\n"[..], 100);
        let mut stray = StrayOutput::new(10, 1024);
        assert!(matches!(
            read_handshake(&mut reader, &mut stray, "p", None).await,
            Err(ReadFailure::Eof)
        ));
        assert_eq!(stray.printed(), "just chatter");
    }

    #[test]
    fn quoted_stdout_is_truncated() {
        let mut stray = StrayOutput::new(usize::MAX, usize::MAX);
        for _ in 0..100 {
            stray.classify(&[b'z'; 100]).unwrap();
        }
        let printed = stray.printed();
        assert!(printed.len() < MAX_QUOTED_STDOUT + 40);
        assert!(printed.ends_with("more bytes)"));
    }

    fn handshake(app_version: u32, cert: Option<Vec<u8>>, multiplex: Option<bool>) -> Handshake {
        Handshake {
            core_version: 1,
            app_version,
            address: Address::Unix("/tmp/x/plugin".into()),
            protocol: Protocol::Grpc,
            server_cert: cert,
            multiplex,
        }
    }

    #[test]
    fn a_version_the_host_did_not_offer_is_incompatible() {
        let config = HandshakeConfig::new("K", "V").app_versions([1, 2]);
        assert_eq!(
            check(&handshake(3, Some(vec![1]), None), &config, true, false),
            Err(Some(Incompatibility::AppVersion { got: 3 }))
        );
        assert!(check(&handshake(2, Some(vec![1]), None), &config, true, false).is_ok());
    }

    #[test]
    fn multiplexing_accepted_when_offered_is_fine_in_every_answer() {
        let config = HandshakeConfig::new("K", "V");
        for answer in [Some(true), Some(false), None] {
            assert_eq!(
                check(&handshake(1, None, answer), &config, false, true),
                Ok(None),
                "{answer:?}"
            );
        }
    }

    #[test]
    fn multiplexing_turned_on_without_an_offer_is_refused_and_turned_off_is_fine() {
        let config = HandshakeConfig::new("K", "V");
        assert_eq!(
            check(&handshake(1, None, Some(true)), &config, false, false),
            Err(Some(Incompatibility::Multiplexing))
        );
        assert_eq!(
            check(&handshake(1, None, Some(false)), &config, false, false),
            Ok(None)
        );
    }

    #[test]
    fn a_missing_certificate_with_tls_on_means_no_automtls() {
        let config = HandshakeConfig::new("K", "V");
        assert_eq!(
            check(&handshake(1, None, None), &config, true, false),
            Err(None)
        );
        assert_eq!(
            check(&handshake(1, Some(vec![7]), None), &config, false, false),
            Err(Some(Incompatibility::UnrequestedTls))
        );
        assert_eq!(
            check(&handshake(1, Some(vec![7]), None), &config, true, false),
            Ok(Some(vec![7]))
        );
    }
}
