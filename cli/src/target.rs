//! Launching the plugin named on the command line.

use std::path::Path;

use tether_broker::{HandshakeConfig, PluginClient, PluginClientBuilder};

use crate::args::{PluginArgs, TargetArgs};
use crate::catalog_origin::Origin;
use crate::error::CliError;
use crate::given;
use crate::installation::Installation;

/// Splits `--cookie KEY=VALUE`.
pub(crate) fn parse_cookie(cookie: &str) -> Result<(&str, &str), CliError> {
    match cookie.split_once('=') {
        Some((key, value)) if !key.is_empty() && !value.is_empty() => Ok((key, value)),
        _ => Err(CliError::BadCookie(cookie.to_owned())),
    }
}

/// Splits `--cmd` into program and arguments.
pub(crate) fn parse_command(cmd: &str) -> Result<(String, Vec<String>), CliError> {
    let bad = |reason: &str| CliError::BadCommand {
        cmd: cmd.to_owned(),
        reason: reason.to_owned(),
    };
    let mut words = shell_words::split(cmd).map_err(|e| bad(&e.to_string()))?;
    if words.is_empty() {
        return Err(bad("it is empty"));
    }
    let program = words.remove(0);
    Ok((program, words))
}

/// The plugin the command line names.
#[derive(Debug)]
pub(crate) enum Choice<'a> {
    /// `--catalog DIR --plugin NAME`, or the older `--catalog DIR NAME`.
    Catalog { dir: &'a Path, plugin: &'a str },
    /// `--cmd COMMAND --cookie KEY=VALUE`, as written.
    Command { cmd: &'a str, cookie: &'a str },
}

impl PluginArgs {
    /// Which plugin `--catalog`/`--plugin` or `--cmd`/`--cookie` name.
    pub(crate) fn choice(&self) -> Result<Choice<'_>, CliError> {
        if let Some((dir, plugin)) =
            catalog_plugin(self.catalog.as_deref(), self.plugin.as_deref())?
        {
            return Ok(Choice::Catalog { dir, plugin });
        }
        match (&self.cmd, &self.cookie) {
            (Some(cmd), Some(cookie)) => Ok(Choice::Command { cmd, cookie }),
            // clap requires --cmd and --cookie unless --catalog is given.
            _ => Err(CliError::BadCommand {
                cmd: String::new(),
                reason: "give --cmd and --cookie, or --catalog DIR --plugin NAME".to_owned(),
            }),
        }
    }
}

/// The catalog directory and plugin of `--catalog DIR --plugin NAME`, or of the older
/// `--catalog DIR NAME` (accepted without `--plugin`); `None` without `--catalog`.
pub(crate) fn catalog_plugin<'a>(
    catalog: Option<&'a [String]>,
    plugin: Option<&'a str>,
) -> Result<Option<(&'a Path, &'a str)>, CliError> {
    const HOW: &str = "write --catalog DIR --plugin NAME";
    match (catalog, plugin) {
        (None, _) => Ok(None),
        (Some([dir]), Some(plugin)) => Ok(Some((Path::new(dir), plugin))),
        (Some([dir, plugin]), None) => Ok(Some((Path::new(dir), plugin))),
        (Some([_]), None) => Err(CliError::Usage(format!(
            "--catalog DIR needs the plugin to launch: {HOW}"
        ))),
        (Some([_, extra]), Some(_)) => Err(CliError::Usage(format!(
            "--catalog takes one directory, but `{extra}` follows it and --plugin is given too: {HOW} (the older --catalog DIR NAME works without --plugin)"
        ))),
        // clap gives --catalog one or two values.
        (Some(_), _) => Err(CliError::Usage(HOW.to_owned())),
    }
}

/// Launches the plugin: spawn, handshake, AutoMTLS (unless `--plaintext`), health check.
pub(crate) async fn launch(target: &TargetArgs) -> Result<PluginClient, CliError> {
    let (cmd, cookie) = match target.which.choice()? {
        Choice::Catalog { dir, plugin } => return launch_from_catalog(target, dir, plugin).await,
        Choice::Command { cmd, cookie } => (cmd, cookie),
    };
    let (program, args) = parse_command(cmd)?;
    crate::binary::check_program(&program, std::env::var_os("PATH").as_deref())
        .map_err(|searched| CliError::missing_program(&program, searched))?;
    let (key, value) = parse_cookie(cookie)?;
    let builder = PluginClient::builder(program)
        .args(args)
        .runtime(target.runtime.into())
        .network(target.network.into())
        .handshake(HandshakeConfig::new(key, value).app_versions(target.app_versions.clone()));
    let mut builder = builder;
    for dir in &target.allow_exec {
        builder = builder.sandbox_allow_exec(dir);
    }
    for dir in &target.allow_read {
        builder = builder.sandbox_allow_read(dir);
    }
    if let Some(delivery) = given::delivery(&target.given)? {
        builder = builder.deliver(delivery);
    }
    for (name, value) in given::env(&target.given)? {
        builder = builder.env(name, value);
    }
    common(builder, target)?
        .start()
        .await
        .map_err(|e| CliError::Start {
            manifest: None,
            source: Box::new(e),
        })
}

/// Launches `plugin` of the catalog in `dir` as its manifest says: command, handshake,
/// sandbox, limits, checksum, allowed environment, and its granted secrets and config files.
async fn launch_from_catalog(
    target: &TargetArgs,
    dir: &Path,
    plugin: &str,
) -> Result<PluginClient, CliError> {
    let install = Installation::load_dir(dir, Origin::Flag, &target.which.install)?;
    let m = install.manifest(plugin)?;
    install.check_binary(plugin)?;
    let builder =
        tether_broker::supervisor::launch(m, &install.grants, &install.secrets, &install.config)
            .map_err(|e| CliError::Delivery {
                plugin: plugin.to_owned(),
                reason: e.to_string(),
            })?;
    common(builder, target)?
        .start()
        .await
        .map_err(|e| CliError::Start {
            manifest: Some(m.file.clone()),
            source: Box::new(e),
        })
}

/// What `--catalog` and `--cmd` launches share: multiplexing, plaintext, the host-service
/// stub of `--host-proto`, and the working
/// directory, which the plugin gets only when `--work-dir` grants one (else the library's
/// default, its private directory: never the current directory).
fn common(
    mut builder: PluginClientBuilder<HandshakeConfig>,
    target: &TargetArgs,
) -> Result<PluginClientBuilder<HandshakeConfig>, CliError> {
    builder = builder.multiplex(target.multiplex);
    if let Some(stub) = given::host_stub(&target.given)? {
        builder = builder.host_routes(stub.routes());
    }
    if target.plaintext {
        builder = builder.plaintext();
    }
    if let Some(dir) = &target.work_dir {
        let dir = std::path::absolute(dir).map_err(CliError::CurrentDir)?;
        builder = builder.current_dir(dir);
    }
    Ok(builder)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_must_have_a_key_and_a_value() {
        assert_eq!(
            parse_cookie("BASIC_PLUGIN=hello").unwrap(),
            ("BASIC_PLUGIN", "hello")
        );
        assert_eq!(parse_cookie("K=a=b").unwrap(), ("K", "a=b"));
        for bad in ["BASIC_PLUGIN", "=hello", "K="] {
            assert!(
                matches!(parse_cookie(bad), Err(CliError::BadCookie(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_catalog_plugin_is_named_by_plugin_or_by_the_older_second_value_but_not_by_both() {
        let one = ["cat".to_owned()];
        let two = ["cat".to_owned(), "kv".to_owned()];
        let expected = Some((Path::new("cat"), "kv"));
        assert_eq!(catalog_plugin(Some(&one), Some("kv")).unwrap(), expected);
        assert_eq!(catalog_plugin(Some(&two), None).unwrap(), expected);
        assert_eq!(catalog_plugin(None, None).unwrap(), None);
        for (catalog, plugin) in [(&one[..], None), (&two[..], Some("kv"))] {
            let err = catalog_plugin(Some(catalog), plugin).unwrap_err();
            assert!(matches!(err, CliError::Usage(_)), "{err}");
            assert!(
                err.to_string().contains("--catalog DIR --plugin NAME"),
                "{err}"
            );
        }
    }

    #[test]
    fn commands_are_split_like_a_shell_would() {
        let (program, args) = parse_command("python3 'my plugin.py' -v").unwrap();
        assert_eq!(program, "python3");
        assert_eq!(args, ["my plugin.py", "-v"]);
        assert!(matches!(
            parse_command("  "),
            Err(CliError::BadCommand { .. })
        ));
        assert!(matches!(
            parse_command("'open"),
            Err(CliError::BadCommand { .. })
        ));
    }
}
