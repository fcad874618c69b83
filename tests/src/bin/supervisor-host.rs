//! A host that runs a catalog through a `tether_broker::Supervisor`, for the host-death tests.
//!
//! `supervisor-host [--put KEY] CATALOG STATE SECRETS DELIVERY RUN NAME...` grants every plugin
//! what its manifest requests (its secrets, from the directory SECRETS, and its confinement), starts the named plugins,
//! asks each to start a grandchild with `Put KEY` (default `child:`; the Rust probe plugin
//! does, e.g. `setsid:` for one that leaves the plugin's session; the Go one answers
//! `InvalidArgument`), prints `cgroup NAME DIR` (with a pids cgroup) and `pid NAME PID` per
//! plugin and then `ready`, and waits to be killed.

use std::path::PathBuf;

use tether_broker::{Catalog, DirValueSource, Grants, Supervisor};
use tether_examples::kv::PutRequest;
use tether_examples::kv::kv_client::KvClient;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let put_key = if args.first().map(String::as_str) == Some("--put") && args.len() > 1 {
        args.drain(..2).nth(1).unwrap_or_default()
    } else {
        "child:".to_owned()
    };
    let [catalog, state, secrets, delivery, run, names @ ..] = args.as_slice() else {
        eprintln!("usage: supervisor-host [--put KEY] CATALOG STATE SECRETS DELIVERY RUN NAME...");
        std::process::exit(2);
    };
    let catalog = Catalog::load_dir(catalog.as_ref()).expect("catalog");
    let mut grants = Grants::new();
    for m in catalog.manifests() {
        for s in &m.secrets {
            grants = grants.secret(&m.name, s);
        }
        grants = grants.confinement(&m.name, m.confinement.clone());
    }
    let (delivery, run) = (PathBuf::from(delivery), PathBuf::from(run));
    let supervisor = Supervisor::builder(catalog, state)
        .grants(grants)
        .secrets(DirValueSource::new(secrets))
        .customize(move |b| b.delivery_dir(&delivery).private_dir_base(&run))
        .build();
    let mut leases = Vec::new();
    for name in names {
        let lease = supervisor.acquire(name).await.expect("plugin starts");
        let child = KvClient::new(lease.channel())
            .put(PutRequest {
                key: put_key.clone(),
                value: Vec::new(),
            })
            .await;
        if let Err(status) = child {
            assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        }
        if let tether_broker::confine::ProcessLimit::Cgroup { dir, .. } = lease.process_limit() {
            tether_tests::misbehave::print_line(&format!("cgroup {name} {}", dir.display()));
        }
        tether_tests::misbehave::print_line(&format!("pid {name} {}", lease.pid()));
        leases.push(lease);
    }
    tether_tests::misbehave::print_line("ready");
    std::future::pending::<()>().await;
}
