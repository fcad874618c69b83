//! Connecting by hand to a plugin started by hand: AutoMTLS works with the host's identity
//! (§4.1) and only with it (§4.2), plaintext without a certificate (§4.3), and health (§7).

use std::sync::Arc;
use std::time::Duration;

use tether_proto::HEALTH_SERVICE;
use tether_proto::handshake::{Address, Handshake};
use tether_proto::tls::{self, Identity};
use tether_transport::{Mux, Target};
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

use super::launch_checks::parsed;
use super::raw::RawRun;
use super::report::{CheckResult, Level, fail, not_applicable, pass};
use super::subject::Subject;

/// How long connecting (TLS included) and one health call may each take.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

fn target(hs: &Handshake) -> Target {
    match &hs.address {
        Address::Unix(path) => Target::Unix(path.clone()),
        Address::Tcp(addr) => Target::Tcp(*addr),
    }
}

/// Connects as `identity` (pinning the announced certificate) or in plaintext, optionally over
/// a yamux session (multiplexed mode), and asks for the health of service `"plugin"`.
async fn health_of(
    hs: &Handshake,
    identity: Option<&Identity>,
    multiplexed: bool,
) -> Result<i32, String> {
    let tls = match (identity, &hs.server_cert) {
        (Some(identity), Some(cert)) => Some(Arc::new(
            tls::client_config(identity, cert.clone().into()).map_err(|e| e.to_string())?,
        )),
        _ => None,
    };
    let target = target(hs);
    let alive = Arc::new(|| true);
    let channel: Channel = if multiplexed {
        let raw = tokio::time::timeout(CONNECT_TIMEOUT, tether_transport::connect_raw(&target))
            .await
            .map_err(|_| format!("connecting to {target} timed out"))?
            .map_err(|e| format!("connecting to {target}: {e}"))?;
        let session = Mux::client(raw);
        tether_transport::connect_streams(session.opener(), tls, alive, CONNECT_TIMEOUT)
            .await
            .map_err(|e| format!("{e}"))?
    } else {
        tether_transport::connect(target, tls, alive, CONNECT_TIMEOUT)
            .await
            .map_err(|e| format!("{e}"))?
    };
    let request = HealthCheckRequest {
        service: HEALTH_SERVICE.to_owned(),
    };
    let mut health = HealthClient::new(channel);
    let call = health.check(request);
    match tokio::time::timeout(CONNECT_TIMEOUT, call).await {
        Err(_) => Err("the health call timed out".to_owned()),
        Ok(Err(status)) => Err(format!("health: {status}")),
        Ok(Ok(response)) => Ok(response.into_inner().status),
    }
}

/// `SERVING` in `grpc.health.v1`.
const SERVING: i32 = 1;

/// §4.1, §4.2 and §7 on one AutoMTLS launch (`host` is the identity whose certificate was sent).
pub(crate) async fn automtls(run: &RawRun, subject: &Subject, host: &Identity) -> [CheckResult; 3] {
    let hs = match parsed(run, subject) {
        Ok((_, hs)) => hs,
        Err(outcome) => {
            let na = || not_applicable("no usable handshake line (see the format check)");
            return [
                CheckResult::new(
                    "AutoMTLS certificate usable",
                    "§4.1",
                    Level::Required,
                    outcome,
                ),
                CheckResult::new("pins the host's certificate", "§4.2", Level::Required, na()),
                CheckResult::new("health", "§7", Level::Required, na()),
            ];
        }
    };
    let usable = health_of(&hs, Some(host), false).await;
    let (usable_outcome, health_outcome) = match &usable {
        Ok(SERVING) => (
            pass("a TLS connection pinning the announced certificate works"),
            pass("service \"plugin\" is SERVING"),
        ),
        Ok(status) => (
            pass("a TLS connection pinning the announced certificate works"),
            fail(
                format!("service \"plugin\" has status {status}"),
                "serve grpc.health.v1.Health and set service \"plugin\" to SERVING",
            ),
        ),
        Err(e) => (
            fail(
                e.clone(),
                "serve TLS with the certificate you announce (ALPN h2, TLS 1.2+), requiring the host's certificate as client certificate",
            ),
            not_applicable("no connection"),
        ),
    };
    let pin_outcome = if usable.is_err() {
        not_applicable("no working connection to compare with")
    } else {
        match Identity::generate() {
            Err(e) => not_applicable(format!("cannot make a stranger's identity: {e}")),
            Ok(stranger) => match health_of(&hs, Some(&stranger), false).await {
                Err(e) => pass(format!(
                    "a client with another certificate is refused ({})",
                    first_words(&e)
                )),
                Ok(_) => fail(
                    "a client presenting another certificate than PLUGIN_CLIENT_CERT was served",
                    "require a client certificate and accept only the exact certificate the host sent in PLUGIN_CLIENT_CERT",
                ),
            },
        }
    };
    [
        CheckResult::new(
            "AutoMTLS certificate usable",
            "§4.1",
            Level::Required,
            usable_outcome,
        ),
        CheckResult::new(
            "pins the host's certificate",
            "§4.2",
            Level::Required,
            pin_outcome,
        ),
        CheckResult::new("health", "§7", Level::Required, health_outcome),
    ]
}

/// §4.3: without `PLUGIN_CLIENT_CERT`, an empty certificate field and plaintext gRPC.
pub(crate) async fn plaintext(run: &RawRun, subject: &Subject) -> CheckResult {
    let outcome = match parsed(run, subject) {
        Err(outcome) => outcome,
        Ok((_, hs)) if hs.server_cert.is_some() => fail(
            "announced a certificate although the host sent none",
            "without PLUGIN_CLIENT_CERT leave field 6 empty and serve plaintext gRPC",
        ),
        Ok((_, hs)) => match health_of(&hs, None, false).await {
            Ok(SERVING) => pass("empty certificate field; plaintext gRPC is SERVING"),
            Ok(status) => fail(
                format!("health status {status}"),
                "set service \"plugin\" to SERVING",
            ),
            Err(e) => fail(
                e,
                "without PLUGIN_CLIENT_CERT serve plaintext gRPC (HTTP/2 without TLS)",
            ),
        },
    };
    CheckResult::new(
        "plaintext without a certificate",
        "§4.3",
        Level::Required,
        outcome,
    )
}

/// §8.3: when the plugin accepted multiplexing, the main connection works as a yamux stream.
pub(crate) async fn multiplexed(run: &RawRun, subject: &Subject, host: &Identity) -> CheckResult {
    let outcome = match parsed(run, subject) {
        Err(outcome) => outcome,
        Ok((_, hs)) if hs.multiplex != Some(true) => {
            not_applicable("the plugin declined multiplexing (optional)")
        }
        Ok((_, hs)) => match health_of(&hs, Some(host), true).await {
            Ok(SERVING) => pass("one connection, yamux, TLS per stream: SERVING"),
            Ok(status) => fail(
                format!("health status {status}"),
                "set service \"plugin\" to SERVING",
            ),
            Err(e) => fail(
                e,
                "when answering `true`, accept one connection, run yamux over it as the server, and serve gRPC (with TLS) on its streams",
            ),
        },
    };
    CheckResult::new("multiplexed connection", "§8.3", Level::Required, outcome)
}

fn first_words(text: &str) -> String {
    text.chars().take(60).collect()
}
