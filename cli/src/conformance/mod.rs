//! `tether conformance`: checks any plugin, in any language, against the protocol reference
//! (`docs/PROTOCOL.md`) and prints a table of checks with what to change for each failure.
//!
//! The checks that need exact control of the plugin's environment or output start it by hand
//! ([`raw`]: wrong cookie, handshake line, versions, AutoMTLS pinning, plaintext, a parent that
//! dies); the ones about a running plugin start it through `tether_host` like any host
//! ([`service_checks`]). The exit status is non-zero when a required check fails.

mod launch_checks;
mod raw;
mod report;
mod service_checks;
mod subject;
mod tls_checks;

use tether_proto::tls::Identity;

use self::raw::{RawOptions, RawRun};
use self::report::{CheckResult, Level, Report, not_applicable};
use self::subject::Subject;
use crate::args::ConformanceArgs;
use crate::error::CliError;

/// Runs every check and prints the report; [`CliError::NotConforming`] when a required check
/// failed.
pub(crate) async fn run(args: ConformanceArgs) -> Result<(), CliError> {
    let subject = Subject::from_args(&args)?;
    let results = check(&subject).await;
    println!(
        "{}",
        Report {
            plugin: &subject.name,
            results: &results,
        }
    );
    let failed = results.iter().filter(|r| r.is_required_failure()).count();
    if failed > 0 {
        return Err(CliError::NotConforming { failed });
    }
    Ok(())
}

async fn check(subject: &Subject) -> Vec<CheckResult> {
    let cookie = launch_checks::cookie(subject).await;
    if let report::Outcome::Fail { seen, .. } = &cookie.outcome
        && seen.starts_with("cannot start")
    {
        // Nothing else can be checked; one row says why.
        return vec![CheckResult::new(
            "the command starts",
            "§1",
            Level::Required,
            report::fail(
                seen.clone(),
                "give --cmd a program that exists and is executable",
            ),
        )];
    }
    let mut results = vec![cookie];
    let host = match Identity::generate() {
        Ok(identity) => identity,
        Err(e) => {
            results.push(CheckResult::new(
                "AutoMTLS certificate usable",
                "§4.1",
                Level::Required,
                report::fail(
                    format!("cannot make the host's identity: {e}"),
                    "(a problem of this machine)",
                ),
            ));
            return results;
        }
    };
    let options = |client_cert, multiplex| RawOptions {
        cookie_value: subject.cookie_value.clone(),
        versions: subject.app_versions.clone(),
        client_cert,
        multiplex,
    };
    let tls = RawRun::start(subject, &options(Some(host.cert_der().clone()), false)).await;
    let offered = RawRun::start(subject, &options(Some(host.cert_der().clone()), true)).await;
    let plain = RawRun::start(subject, &options(None, false)).await;
    match (&tls, &offered, &plain) {
        (Ok(tls), Ok(offered), Ok(plain)) => {
            results.push(launch_checks::format(tls, subject));
            results.push(launch_checks::seventh_field(tls, offered, subject));
            results.push(launch_checks::noise(tls));
            results.extend(tls_checks::automtls(tls, subject, &host).await);
            results.push(tls_checks::plaintext(plain, subject).await);
            results.push(tls_checks::multiplexed(offered, subject, &host).await);
        }
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => results.push(CheckResult::new(
            "handshake line format",
            "§3.1",
            Level::Required,
            report::fail(e.clone(), "make the command start"),
        )),
    }
    drop((tls, offered, plain));
    results.push(launch_checks::versions(subject).await);
    results.extend(service_checks::all(subject).await);
    results.push(launch_checks::host_death(subject).await);
    results.push(CheckResult::new(
        "secrets from the delivered dir",
        "§10.2",
        Level::Required,
        not_applicable(
            "which file a plugin reads cannot be seen from outside; test it in-process (tether-sdk-test's TestHost::secret, the Python SDK's granted_files fixture)",
        ),
    ));
    results
}
