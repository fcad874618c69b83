//! `tether inspect`: launch a plugin and report what was negotiated.

use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

use crate::args::InspectArgs;
use crate::descriptors;
use crate::error::CliError;
use crate::target;

/// Launches the plugin, prints one `key: value` line per fact, shuts it down.
pub(crate) async fn run(args: InspectArgs) -> Result<(), CliError> {
    let plugin = target::launch(&args.target).await?;
    println!("plugin: {}", plugin.name());
    println!("pid: {}", plugin.pid());
    println!("app protocol version: {}", plugin.app_version());
    println!(
        "transport: {} {}",
        plugin.address().network(),
        plugin.address()
    );
    println!("broker: {}", plugin.broker_mode());
    match plugin.peer_fingerprint() {
        Some(fp) => println!("tls: mutual, plugin certificate sha256 {fp}"),
        None => println!("tls: off (plaintext)"),
    }
    let health = HealthClient::new(plugin.channel())
        .check(HealthCheckRequest {
            service: tether_proto::HEALTH_SERVICE.to_owned(),
        })
        .await;
    match health {
        Ok(r) => println!("health: {:?}", r.into_inner().status()),
        Err(status) => println!("health: error: {}", status.message()),
    }
    match descriptors::list_services(plugin.channel()).await {
        Ok(mut services) => {
            services.sort();
            println!("services: {}", services.join(", "));
        }
        Err(e) => println!("services: unknown (no server reflection: {e})"),
    }
    let outcome = plugin.shutdown().await.map_err(CliError::Shutdown)?;
    println!("shutdown: {outcome}");
    Ok(())
}
