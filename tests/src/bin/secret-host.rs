//! A host built on the library that delivers a secret, for the leftover tests (issue 22, item
//! 7), which kill it or its plugin (`SIGKILL`) at chosen and at random points and then look at
//! what is left.
//!
//! ```text
//! secret-host [--allow-exec DIR]… [--allow-read DIR]… DELIVERY_DIR PRIVATE_DIR_BASE PROGRAM ARGS…
//! ```
//!
//! Starts the KV plugin `PROGRAM ARGS…` (cookie `BASIC_PLUGIN=hello`) with the secret `token`
//! delivered under `DELIVERY_DIR` and its private directory under `PRIVATE_DIR_BASE`, then prints
//! one line per event on stdout: `started PID` (the plugin's pid), `called` after each `call`
//! line read on stdin (a `Put` then a `Get`), `stopping` when stdin ends and `stopped` once the
//! plugin is shut down. Exit status: 0, 1 when a call or the shutdown failed, 3 when the start
//! failed (the error on stderr).

use std::process::ExitCode;

use secrecy::SecretSlice;
use tether_broker::{Delivery, HandshakeConfig, PluginClient};
use tether_examples::kv::kv_client::KvClient;
use tether_examples::kv::{GetRequest, PutRequest};

/// The value of the delivered secret `token`.
const SECRET: &[u8] = b"leftover-4e1f";

/// Says `event` on stdout at once (the tests wait for these lines).
fn say(event: &str) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    // The tests read every line; a closed stdout means they are gone.
    let _ = writeln!(stdout, "{event}").and_then(|()| stdout.flush());
}

/// One message per `call` line on stdin, until it ends (read on a thread of its own).
fn calls() -> tokio::sync::mpsc::UnboundedReceiver<()> {
    use std::io::BufRead as _;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            match line {
                Ok(line) if line == "call" => {
                    if tx.send(()).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(_) => return,
            }
        }
    });
    rx
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1).peekable();
    let mut builder_allowances = Vec::new();
    let mut no_world = false;
    while let Some(flag) =
        args.next_if(|a| a == "--allow-exec" || a == "--allow-read" || a == "--no-world")
    {
        if flag == "--no-world" {
            no_world = true;
            continue;
        }
        let Some(dir) = args.next() else {
            eprintln!("secret-host: {flag} needs a directory");
            return ExitCode::from(2);
        };
        builder_allowances.push((flag, dir));
    }
    let args: Vec<String> = args.collect();
    let [delivery_dir, private_dir_base, program, rest @ ..] = args.as_slice() else {
        eprintln!(
            "usage: secret-host [--no-world] [--allow-exec DIR]… [--allow-read DIR]… DELIVERY_DIR PRIVATE_DIR_BASE PROGRAM ARGS…"
        );
        return ExitCode::from(2);
    };
    let mut builder = PluginClient::builder(program)
        .args(rest)
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .deliver(Delivery::new().secret("token", SecretSlice::from(SECRET.to_vec())))
        .delivery_dir(delivery_dir)
        .private_dir_base(private_dir_base);
    if no_world {
        builder = builder.namespaces(tether_broker::confine::NamespacesMode::Off);
    }
    for (flag, dir) in builder_allowances {
        builder = match flag.as_str() {
            "--allow-exec" => builder.sandbox_allow_exec(dir),
            _ => builder.sandbox_allow_read(dir),
        };
    }
    let client = match builder.start().await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("secret-host: {e}");
            return ExitCode::from(3);
        }
    };
    say(&format!("started {}", client.pid()));
    let mut failed = false;
    let mut kv = KvClient::new(client.channel());
    let mut calls = calls();
    while calls.recv().await.is_some() {
        let put = PutRequest {
            key: "k".to_owned(),
            value: SECRET.to_vec(),
        };
        let result = match kv.put(put).await {
            Ok(_) => kv
                .get(GetRequest {
                    key: "k".to_owned(),
                })
                .await
                .map(drop),
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            eprintln!("secret-host: the call failed: {e}");
            failed = true;
        }
        say("called");
    }
    say("stopping");
    if let Err(e) = client.shutdown().await {
        eprintln!("secret-host: {e}");
        failed = true;
    }
    say("stopped");
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
