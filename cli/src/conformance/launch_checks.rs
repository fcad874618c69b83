//! Checks of what a plugin does before anyone connects: the cookie (§2.2), the handshake line
//! (§3.1–§3.3), version negotiation (§2.3) and exiting with its host (§6.3). Each starts the
//! plugin by hand ([`RawRun`]).

use tether_proto::handshake::{CORE_PROTOCOL_VERSION, GO_MIN_CERT_FIELD_LEN, Handshake};

use super::raw::{RawOptions, RawRun, wait_pid_exit};
use super::report::{CheckResult, Level, Outcome, fail, not_applicable, pass};
use super::subject::Subject;

/// An app protocol version no real plugin supports, offered beside the real ones.
const UNSUPPORTED_VERSION: u32 = 9_999;

/// What a handshake line says, field by field, before any parsing.
pub(crate) fn fields(line: &str) -> Vec<&str> {
    line.trim().split('|').collect()
}

/// §2.2: with a wrong cookie the plugin exits non-zero, prints nothing on stdout and says why
/// on stderr.
pub(crate) async fn cookie(subject: &Subject) -> CheckResult {
    let options = RawOptions {
        cookie_value: format!("{}-not-the-cookie", subject.cookie_value),
        versions: subject.app_versions.clone(),
        client_cert: None,
        multiplex: false,
    };
    let outcome = match RawRun::start(subject, &options).await {
        Err(e) => fail(e, "make the command start"),
        Ok(mut run) => {
            let status = run.wait_exit(subject.start_timeout).await;
            let stderr = run.stderr();
            let remedy = "check the cookie variable before anything else; when it is missing or wrong, print a message for humans to stderr, print nothing on stdout and exit with status 1";
            if let Some(line) = &run.handshake {
                fail(format!("printed a handshake line: {line}"), remedy)
            } else if !run.before.is_empty() {
                fail(format!("printed on stdout: {:?}", run.before[0]), remedy)
            } else {
                match status {
                    None => fail(
                        format!("still running after {:?}", subject.start_timeout),
                        remedy,
                    ),
                    Some(s) if s.success() => fail("exited with status 0", remedy),
                    Some(_) if stderr.is_empty() => {
                        fail("exited without a message on stderr", remedy)
                    }
                    Some(s) => pass(format!(
                        "{s}, stdout empty, stderr: {:?}",
                        stderr.lines().next().unwrap_or_default()
                    )),
                }
            }
        }
    };
    CheckResult::new("wrong cookie refused", "§2.2", Level::Required, outcome)
}

/// The handshake line of a launch, parsed; or why there is none, as a failed outcome.
pub(crate) fn parsed(run: &RawRun, subject: &Subject) -> Result<(String, Handshake), Outcome> {
    let remedy_missing = "print the handshake line CORE|APP|NETWORK|ADDR|grpc|CERT on stdout (and flush it) once the server listens";
    let Some(line) = &run.handshake else {
        let seen = match (run.exit, run.timed_out) {
            (Some(status), _) => format!(
                "exited ({status}) without a handshake line; stderr: {}",
                tail(&run.stderr())
            ),
            (None, true) => format!("no handshake line within {:?}", subject.start_timeout),
            (None, false) => "no handshake line (stdout ended)".to_owned(),
        };
        return Err(fail(seen, remedy_missing));
    };
    Handshake::parse(line.as_bytes())
        .map(|hs| (line.clone(), hs))
        .map_err(|e| {
            fail(
                format!("{e}: {}", tail(line)),
                "print exactly CORE|APP|NETWORK|ADDR|PROTOCOL|CERT: core 1, network unix or tcp, protocol grpc, the DER certificate in base64 without padding",
            )
        })
}

/// The app protocol version the plugin answers when offered the subject's versions (without
/// `--app-version`, the default 1): `Some(v)` when it announced a version it was not offered,
/// as a go-plugin plugin with one version does (a Terraform provider or a Vault plugin
/// answers 5); the checks then offer that version, as a host built for the plugin would.
pub(crate) async fn announced_other_version(subject: &Subject) -> Option<u32> {
    let options = RawOptions {
        cookie_value: subject.cookie_value.clone(),
        versions: subject.app_versions.clone(),
        client_cert: None,
        multiplex: false,
    };
    let run = RawRun::start(subject, &options).await.ok()?;
    let (_, hs) = parsed(&run, subject).ok()?;
    (!subject.app_versions.contains(&hs.app_version)).then_some(hs.app_version)
}

/// §3.1: field by field, for a launch with AutoMTLS and without multiplexing.
pub(crate) fn format(run: &RawRun, subject: &Subject) -> CheckResult {
    let outcome = match parsed(run, subject) {
        Err(outcome) => outcome,
        Ok((line, hs)) => {
            let f = fields(&line);
            let cert = f.get(5).copied().unwrap_or_default();
            if f.len() < 6 {
                fail(
                    format!("{} fields; six are required", f.len()),
                    "print all six fields, the sixth (certificate) empty without AutoMTLS",
                )
            } else if cert.ends_with('=') {
                fail(
                    "the certificate is base64 with `=` padding, which go-plugin hosts cannot decode",
                    "encode the certificate with the standard alphabet without padding (Go's RawStdEncoding)",
                )
            } else if hs.server_cert.is_none() || cert.len() <= GO_MIN_CERT_FIELD_LEN {
                fail(
                    "no certificate although the host sent PLUGIN_CLIENT_CERT",
                    "with PLUGIN_CLIENT_CERT set, make a certificate and announce it (DER, base64) in field 6",
                )
            } else if hs.core_version != CORE_PROTOCOL_VERSION {
                fail(
                    format!("core version {}", hs.core_version),
                    "print core version 1",
                )
            } else {
                pass(format!(
                    "{} {}, app {}, grpc, certificate {} base64 chars",
                    hs.address.network(),
                    hs.address,
                    hs.app_version,
                    cert.len()
                ))
            }
        }
    };
    CheckResult::new("handshake line format", "§3.1", Level::Required, outcome)
}

/// §3.2: nothing before the handshake line on stdout.
pub(crate) fn noise(run: &RawRun) -> CheckResult {
    let outcome = match (run.handshake.is_some(), run.before.first()) {
        (false, _) => not_applicable("no handshake line"),
        (true, None) => pass("the handshake line is the first output"),
        (true, Some(first)) => fail(
            format!(
                "{} line(s) before the handshake, first {first:?}",
                run.before.len()
            ),
            "print nothing on stdout before the handshake line (go-plugin hosts fail on it); log to stderr",
        ),
    };
    CheckResult::new(
        "nothing on stdout before it",
        "§3.2",
        Level::Recommended,
        outcome,
    )
}

/// §3.3: without `PLUGIN_MULTIPLEX_GRPC` no seventh field (`plain`); with it, at most seven
/// and the seventh `true`/`false` (`offered`).
pub(crate) fn seventh_field(plain: &RawRun, offered: &RawRun, subject: &Subject) -> CheckResult {
    let outcome = match (parsed(plain, subject), parsed(offered, subject)) {
        (Err(outcome), _) | (_, Err(outcome)) => outcome,
        (Ok((line, _)), _) if fields(&line).len() > 6 => fail(
            "a seventh field although the host did not set PLUGIN_MULTIPLEX_GRPC",
            "print the seventh field only when PLUGIN_MULTIPLEX_GRPC is set: hosts before go-plugin 1.6 read it as part of the certificate",
        ),
        (Ok(_), Ok((_, hs))) => pass(match hs.multiplex {
            Some(true) => "absent unless offered; offered: `true` (multiplexing accepted)",
            Some(false) => "absent unless offered; offered: `false` (declined)",
            None => "absent unless offered; offered: absent (declined)",
        }),
    };
    CheckResult::new(
        "7th field only when offered",
        "§3.3",
        Level::Required,
        outcome,
    )
}

/// §2.3: the highest common version when an unsupported higher one is offered too, and never
/// an unsupported one as agreed.
pub(crate) async fn versions(subject: &Subject) -> CheckResult {
    let Some(&best) = subject.app_versions.iter().max() else {
        return CheckResult::new(
            "version negotiation",
            "§2.3",
            Level::Required,
            not_applicable("no app versions"),
        );
    };
    let offer = |versions: Vec<u32>| RawOptions {
        cookie_value: subject.cookie_value.clone(),
        versions,
        client_cert: None,
        multiplex: false,
    };
    let remedy = "choose the highest version offered in PLUGIN_PROTOCOL_VERSIONS that the plugin supports; with none in common, answer the plugin's lowest (or exit non-zero)";
    let mixed = match RawRun::start(subject, &offer(vec![UNSUPPORTED_VERSION, best])).await {
        Err(e) => {
            return CheckResult::new(
                "version negotiation",
                "§2.3",
                Level::Required,
                fail(e, remedy),
            );
        }
        Ok(run) => parsed(&run, subject).map(|(_, hs)| hs.app_version),
    };
    let outcome = match mixed {
        Err(outcome) => outcome,
        Ok(v) if v != best => fail(
            format!("offered {UNSUPPORTED_VERSION},{best}; answered {v}"),
            remedy,
        ),
        Ok(_) => match RawRun::start(subject, &offer(vec![UNSUPPORTED_VERSION])).await {
            Err(e) => fail(e, remedy),
            Ok(mut run) => match (&run.handshake, parsed(&run, subject)) {
                (_, Ok((_, hs))) if hs.app_version == UNSUPPORTED_VERSION => fail(
                    format!("offered only {UNSUPPORTED_VERSION}; the plugin agreed to it"),
                    remedy,
                ),
                (_, Ok((_, hs))) => pass(format!(
                    "offered {UNSUPPORTED_VERSION},{best}: {best}; offered {UNSUPPORTED_VERSION}: answered {} (refused by hosts)",
                    hs.app_version
                )),
                (None, _) => match run.wait_exit(subject.start_timeout).await {
                    Some(s) if !s.success() => pass(format!(
                        "offered {UNSUPPORTED_VERSION},{best}: {best}; offered {UNSUPPORTED_VERSION}: exited ({s})"
                    )),
                    _ => fail(
                        format!(
                            "offered only {UNSUPPORTED_VERSION}: neither a handshake nor a failed exit"
                        ),
                        remedy,
                    ),
                },
                (Some(_), Err(outcome)) => outcome,
            },
        },
    };
    CheckResult::new("version negotiation", "§2.3", Level::Required, outcome)
}

/// §6.3: the plugin exits when its parent (the host) is killed.
pub(crate) async fn host_death(subject: &Subject) -> CheckResult {
    let options = RawOptions {
        cookie_value: subject.cookie_value.clone(),
        versions: subject.app_versions.clone(),
        client_cert: None,
        multiplex: false,
    };
    let remedy = "watch the parent process (a pidfd on getppid(), or poll it) and exit when it is gone; tether hosts also set a parent-death signal, other hosts do not";
    let outcome = match RawRun::start_orphanable(subject, &options).await {
        Err(e) => fail(e, remedy),
        Ok(mut run) => match (run.plugin_pid, &run.handshake) {
            (Some(pid), Some(_)) => {
                run.kill_parent().await;
                match wait_pid_exit(pid, subject.host_death_timeout).await {
                    Ok(true) => pass("exited when its parent was killed"),
                    Ok(false) => fail(
                        format!(
                            "still running {:?} after its parent was killed",
                            subject.host_death_timeout
                        ),
                        remedy,
                    ),
                    Err(e) => not_applicable(e),
                }
            }
            _ => not_applicable("the plugin did not start (see the handshake checks)"),
        },
    };
    CheckResult::new(
        "exits when the host dies",
        "§6.3",
        Level::Recommended,
        outcome,
    )
}

/// The last line of `text`, shortened.
pub(crate) fn tail(text: &str) -> String {
    let last = text.trim().lines().last().unwrap_or_default();
    last.chars().take(200).collect()
}
