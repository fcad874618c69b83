//! `tether inspect`: launch a plugin and report what was negotiated, then describe the
//! plugin's own services (the `describe` module).

use tether_broker::PluginClient;
use tether_proto::text::escape;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

use crate::args::InspectArgs;
use crate::describe;
use crate::descriptors;
use crate::error::CliError;
use crate::output::outln;
use crate::target;

/// Launches the plugin, prints one `key: value` line per fact and each service it describes,
/// shuts it down (also when stdout closes early). What the plugin announced or answered is
/// escaped on its one line.
pub(crate) async fn run(args: InspectArgs) -> Result<(), CliError> {
    let plugin = target::launch(&args.target).await?;
    let printed = report(&plugin).await;
    let shutdown = plugin.shutdown().await;
    printed?;
    let outcome = shutdown.map_err(CliError::Shutdown)?;
    outln!("shutdown: {outcome}")
}

async fn report(plugin: &PluginClient) -> Result<(), CliError> {
    outln!("plugin: {}", plugin.name())?;
    outln!("pid: {}", plugin.pid())?;
    outln!("app protocol version: {}", plugin.app_version())?;
    outln!(
        "transport: {} {}",
        plugin.address().network(),
        escape(&plugin.address().to_string())
    )?;
    outln!("broker: {}", plugin.broker_mode())?;
    match plugin.peer_fingerprint() {
        Some(fp) => outln!("tls: mutual, plugin certificate sha256 {fp}")?,
        None => outln!("tls: off (plaintext)")?,
    }
    let health = HealthClient::new(plugin.channel())
        .check(HealthCheckRequest {
            service: tether_proto::HEALTH_SERVICE.to_owned(),
        })
        .await;
    match health {
        Ok(r) => outln!("health: {:?}", r.into_inner().status())?,
        Err(status) => outln!("health: error: {}", escape(status.message()))?,
    }
    let mut services = match descriptors::list_services(plugin.channel().into_inner()).await {
        Ok(services) => services,
        Err(e) => {
            return outln!(
                "services: unknown (no server reflection: {})",
                escape(&e.to_string())
            );
        }
    };
    services.sort();
    let shown: Vec<String> = services.iter().map(|s| escape(s).to_string()).collect();
    outln!("services: {}", shown.join(", "))?;
    let own: Vec<String> = services
        .into_iter()
        .filter(|s| !describe::is_protocol_service(s))
        .collect();
    let (pool, undescribed) =
        match descriptors::describe_services(plugin.channel().into_inner(), &own).await {
            Ok(described) => described,
            Err(e) => return outln!("descriptions: unavailable ({})", escape(&e.to_string())),
        };
    for name in &own {
        if let Some(service) = pool.get_service_by_name(name) {
            let served = describe::probe(plugin.channel().into_inner(), &service).await;
            outln!("{}", describe::service_text(&service, served))?;
        }
    }
    for (name, why) in undescribed {
        outln!(
            "service {} (reflection cannot describe it: {})",
            escape(&name),
            escape(&why.to_string())
        )?;
    }
    Ok(())
}
