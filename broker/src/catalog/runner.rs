//! A manifest's `runner` key with its `[gvisor]` and `[kubernetes]` tables, and what a command
//! that names an interpreter should be instead. Pure: values in, a [`Runner`] or a refusal
//! (where, which key, why) out.

use serde::Deserialize;
use toml::Spanned;

use crate::launch::interpreted::runtime::interpreter_named;
use crate::launch::runner::options::{GvisorOptions, Runner, check_pinned};

/// The manifest's `[gvisor]` table: the sandbox's own memory and CPU limits (its cgroup),
/// for `runner = "gvisor"` only.
#[derive(Deserialize, Default, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGvisor {
    memory_mib: Option<u64>,
    cpu_millis: Option<u64>,
}

/// The manifest's `[kubernetes]` table: what the plugin's author decides of its Pod (the image
/// and its resources); where the Pods go and who owns them is the host's
/// ([`SupervisorBuilder::kubernetes`](crate::SupervisorBuilder::kubernetes)).
#[derive(Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawKubernetes {
    image: Option<Spanned<String>>,
    memory_limit: Option<Spanned<String>>,
    cpu_limit: Option<Spanned<String>>,
    runtime_class: Option<Spanned<String>>,
}

/// The manifest's `runner` key (and the grants file's, which only `kubernetes` needs).
#[derive(Deserialize, Default, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawRunner {
    #[default]
    Process,
    Gvisor,
    Kubernetes,
}

impl RawRunner {
    /// The name as manifests spell it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Process => "process",
            Self::Gvisor => "gvisor",
            Self::Kubernetes => "kubernetes",
        }
    }
}

/// Why a manifest's runner is refused: the byte offset in the file, the dotted key, the
/// message.
pub(crate) type Refusal = (usize, &'static str, String);

/// The manifest's runner from its `runner` key (`None`: the process runner) and its tables.
///
/// # Errors
/// A table for another runner than the one chosen, a zero gVisor limit, the Pod runner without
/// its table or its image, an image not pinned by digest, a malformed quantity or runtime
/// class, or the Pod runner in a host built without the feature `kubernetes`.
pub(crate) fn choose(
    runner: Option<&Spanned<RawRunner>>,
    gvisor: Option<&Spanned<RawGvisor>>,
    kubernetes: Option<&Spanned<RawKubernetes>>,
) -> Result<Runner, Refusal> {
    let chosen = runner.map_or(RawRunner::Process, |r| *r.get_ref());
    let at_runner = runner.map_or(0, |r| r.span().start);
    if let Some(table) = gvisor.filter(|_| chosen != RawRunner::Gvisor) {
        return Err((
            table.span().start,
            "gvisor",
            format!(
                "sets the gVisor sandbox's limits, but the plugin runs under the {} runner: add \
                 `runner = \"gvisor\"` or use `[limits]`",
                chosen.name()
            ),
        ));
    }
    if let Some(table) = kubernetes.filter(|_| chosen != RawRunner::Kubernetes) {
        return Err((
            table.span().start,
            "kubernetes",
            format!(
                "describes the plugin's Pod, but the plugin runs under the {} runner: add \
                 `runner = \"kubernetes\"` or remove the table",
                chosen.name()
            ),
        ));
    }
    match chosen {
        RawRunner::Process => Ok(Runner::Process),
        RawRunner::Gvisor => gvisor_options(gvisor),
        RawRunner::Kubernetes => {
            let Some(table) = kubernetes else {
                return Err((
                    at_runner,
                    "runner",
                    "the Pod runner needs a `[kubernetes]` table naming the plugin's image: \
                     `image = \"REPOSITORY@sha256:<64 hex digits>\"`"
                        .to_owned(),
                ));
            };
            pod(table, at_runner)
        }
    }
}

/// `[gvisor]`'s limits (none without the table); a zero limit is refused.
fn gvisor_options(table: Option<&Spanned<RawGvisor>>) -> Result<Runner, Refusal> {
    let mut options = GvisorOptions::new();
    let Some(table) = table else {
        return Ok(Runner::Gvisor(options));
    };
    let limits = table.get_ref();
    for (key, value) in [
        ("gvisor.memory_mib", limits.memory_mib),
        ("gvisor.cpu_millis", limits.cpu_millis),
    ] {
        if value == Some(0) {
            return Err((table.span().start, key, "must be above 0".to_owned()));
        }
    }
    if let Some(mib) = limits.memory_mib {
        options = options.memory_mib(mib);
    }
    if let Some(millis) = limits.cpu_millis {
        options = options.cpu_millis(millis);
    }
    Ok(Runner::Gvisor(options))
}

/// The checked `[kubernetes]` table as the Pod runner's options (the host's part left at its
/// defaults, filled in by the supervisor).
fn pod(table: &Spanned<RawKubernetes>, at_runner: usize) -> Result<Runner, Refusal> {
    let raw = table.get_ref();
    let Some(image) = &raw.image else {
        return Err((
            table.span().start,
            "kubernetes.image",
            "is missing: name the plugin's image pinned by digest, \
             `image = \"REPOSITORY@sha256:<64 hex digits>\"`"
                .to_owned(),
        ));
    };
    check_pinned(image.get_ref()).map_err(|why| (image.span().start, "kubernetes.image", why))?;
    for (key, value) in [
        ("kubernetes.memory_limit", &raw.memory_limit),
        ("kubernetes.cpu_limit", &raw.cpu_limit),
    ] {
        if let Some(value) = value.as_ref().filter(|v| !is_quantity(v.get_ref())) {
            return Err((
                value.span().start,
                key,
                format!(
                    "`{}` is not a Kubernetes quantity: write e.g. \"256Mi\" (memory) or \
                     \"500m\" (CPU)",
                    value.get_ref().escape_debug()
                ),
            ));
        }
    }
    if let Some(class) = raw
        .runtime_class
        .as_ref()
        .filter(|c| !is_dns_subdomain(c.get_ref()))
    {
        return Err((
            class.span().start,
            "kubernetes.runtime_class",
            "must be a RuntimeClass's name: lower-case letters, digits, `-` and `.`, at most \
             253, e.g. \"gvisor\""
                .to_owned(),
        ));
    }
    pod_options(raw, image.get_ref(), at_runner)
}

#[cfg(feature = "kubernetes")]
fn pod_options(raw: &RawKubernetes, image: &str, _: usize) -> Result<Runner, Refusal> {
    use crate::launch::runner::kubernetes::options::KubernetesOptions;
    let mut options = KubernetesOptions::new(image);
    if let Some(q) = &raw.memory_limit {
        options = options.memory_limit(q.get_ref());
    }
    if let Some(q) = &raw.cpu_limit {
        options = options.cpu_limit(q.get_ref());
    }
    if let Some(class) = &raw.runtime_class {
        options = options.runtime_class(class.get_ref());
    }
    Ok(Runner::Kubernetes(options))
}

#[cfg(not(feature = "kubernetes"))]
fn pod_options(_: &RawKubernetes, _: &str, at_runner: usize) -> Result<Runner, Refusal> {
    Err((
        at_runner,
        "runner",
        "this host was built without the Pod runner: build it with tether-broker's cargo \
         feature `kubernetes` (the `tether` command: `--features kubernetes`)"
            .to_owned(),
    ))
}

/// A Kubernetes quantity as limits use it: a decimal number and an optional suffix (`Ki`…`Ei`,
/// `n`, `u`, `m`, `k`, `M`…`E`).
fn is_quantity(text: &str) -> bool {
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let digits = number.bytes().filter(u8::is_ascii_digit).count();
    let dots = number.bytes().filter(|&b| b == b'.').count();
    digits > 0
        && dots <= 1
        && [
            "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E",
        ]
        .contains(&suffix)
}

/// A DNS subdomain name (RFC 1123), what a RuntimeClass is named.
fn is_dns_subdomain(text: &str) -> bool {
    let edge = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    text.len() <= 253
        && edge(text.bytes().next())
        && edge(text.bytes().last())
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

/// For a manifest whose command is an interpreter's bare name (`python3`, `node`): how to
/// run an interpreted plugin from a catalog instead.
pub(crate) fn interpreter_hint(command: &str) -> Option<String> {
    interpreter_named(std::path::Path::new(command)).map(|_| {
        format!(
            "names the interpreter `{command}`, but a command is a program in the catalog: \
             link the plugin's script into it (e.g. `bin/NAME` → your script, whose `#!` line \
             names `{command}`) and set `command = \"bin/NAME\"`; the host then resolves and \
             confines the real interpreter (`runtime`)"
        )
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[cfg(feature = "kubernetes")]
    use crate::catalog::grants::Grants;
    use crate::catalog::manifest::{CatalogFileError, Manifest};
    #[cfg(feature = "kubernetes")]
    use crate::catalog::request::Request;
    #[cfg(feature = "kubernetes")]
    use crate::launch::runner::options::Runner;

    const DIGEST: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    /// A manifest at /cat/kv.toml: line 1 `name`, line 2 `command`, line 3 `runner`, then
    /// `extra` (the tables).
    fn parse(command: &str, runner: &str, extra: &str) -> Result<Manifest, CatalogFileError> {
        let text = format!(
            "name = \"kv\"\ncommand = \"{command}\"\n{runner}\n[handshake]\ncookie_key = \"K\"\n\
             cookie_value = \"V\"\n{extra}"
        );
        Manifest::parse(&text, Path::new("/cat/kv.toml")).map_err(|e| e.first().clone())
    }

    fn pod(table: &str) -> Result<Manifest, CatalogFileError> {
        parse("/plugin/kv", "runner = \"kubernetes\"", table)
    }

    #[cfg(feature = "kubernetes")]
    #[test]
    fn a_kubernetes_table_gives_the_pods_image_limits_and_runtime_class_and_the_command_is_in_the_image()
     {
        let m = pod(&format!(
            "[kubernetes]\nimage = \"reg.example/kv@sha256:{DIGEST}\"\nmemory_limit = \
             \"256Mi\"\ncpu_limit = \"500m\"\nruntime_class = \"gvisor\"\n"
        ))
        .unwrap();
        let Runner::Kubernetes(options) = &m.runner else {
            panic!("{:?}", m.runner)
        };
        assert_eq!(
            options.image_reference(),
            format!("reg.example/kv@sha256:{DIGEST}")
        );
        assert_eq!(options.memory_limit.as_deref(), Some("256Mi"));
        assert_eq!(options.cpu_limit.as_deref(), Some("500m"));
        assert_eq!(options.runtime_class.as_deref(), Some("gvisor"));
        assert_eq!(m.command, Path::new("/plugin/kv"));
        assert_eq!(
            m.runner.to_string(),
            format!(
                "kubernetes (image reg.example/kv@sha256:{DIGEST}, memory 256Mi, cpu 500m, \
                 runtime class gvisor)"
            )
        );
    }

    #[test]
    fn a_tag_only_image_is_refused_at_its_line_saying_to_pin_it_by_digest() {
        let err = pod("[kubernetes]\nimage = \"reg.example/kv:1.2\"\n").unwrap_err();
        assert_eq!(
            (err.line, err.key.as_deref()),
            (8, Some("kubernetes.image")),
            "{err}"
        );
        assert!(err.message.contains("not pinned by digest"), "{err}");
        assert!(err.to_string().contains("/cat/kv.toml:8"), "{err}");
    }

    #[test]
    fn the_pod_runner_without_its_table_or_image_or_with_bad_values_is_refused_where_they_are() {
        let err = pod("").unwrap_err();
        assert_eq!((err.line, err.key.as_deref()), (3, Some("runner")), "{err}");
        assert!(err.message.contains("[kubernetes]"), "{err}");
        let err = pod("[kubernetes]\nmemory_limit = \"1Gi\"\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("kubernetes.image"), "{err}");
        let image = format!("image = \"reg.example/kv@sha256:{DIGEST}\"");
        for (bad, key) in [
            ("memory_limit = \"lots\"", "kubernetes.memory_limit"),
            ("cpu_limit = \"1.5.0\"", "kubernetes.cpu_limit"),
            ("runtime_class = \"GVisor!\"", "kubernetes.runtime_class"),
            ("replicas = 3", "kubernetes.replicas"),
        ] {
            let err = pod(&format!("[kubernetes]\n{image}\n{bad}\n")).unwrap_err();
            assert_eq!((err.line, err.key.as_deref()), (9, Some(key)), "{err}");
        }
        let err = parse("bin/kv", "", &format!("[kubernetes]\n{image}\n")).unwrap_err();
        assert!(err.message.contains("process runner"), "{err}");
    }

    #[cfg(feature = "kubernetes")]
    #[test]
    fn the_pod_runners_command_is_an_absolute_path_in_the_image_and_sha256_is_refused() {
        let image = format!("image = \"reg.example/kv@sha256:{DIGEST}\"");
        let table = format!("[kubernetes]\n{image}\n");
        let err = parse("bin/kv", "runner = \"kubernetes\"", &table).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("command"), "{err}");
        assert!(err.message.contains("absolute path in the image"), "{err}");
        let pinned = format!("runner = \"kubernetes\"\nsha256 = \"{DIGEST}\"");
        let err = parse("/plugin/kv", &pinned, &table).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("sha256"), "{err}");
    }

    #[cfg(feature = "kubernetes")]
    #[test]
    fn the_pod_runner_is_refused_until_granted_naming_the_manifests_line_and_the_grants_line() {
        let m = pod(&format!(
            "[kubernetes]\nimage = \"reg.example/kv@sha256:{DIGEST}\"\n"
        ))
        .unwrap();
        let refused = Grants::new().secret("kv", "x").check(&m).unwrap_err();
        assert_eq!(refused.request, Request::Runner("kubernetes"));
        let text = refused.to_string();
        assert!(text.contains("/cat/kv.toml:3"), "{text}");
        assert!(
            text.contains("add `runner = \"kubernetes\"` under `[plugins.kv]`"),
            "{text}"
        );
        Grants::new().kubernetes_runner("kv").check(&m).unwrap();
        let file = Grants::parse(
            "[plugins.kv]\nrunner = \"kubernetes\"\n",
            Path::new("/g.toml"),
        )
        .unwrap();
        assert!(file.allows_kubernetes_runner("kv"));
        file.check(&m).unwrap();
        let err =
            Grants::parse("[plugins.kv]\nrunner = \"gvisor\"\n", Path::new("/g.toml")).unwrap_err();
        assert!(err.first().message.contains("needs no grant"), "{err}");
    }

    #[cfg(not(feature = "kubernetes"))]
    #[test]
    fn the_pod_runner_in_a_host_built_without_it_is_refused_naming_the_feature() {
        let err = pod(&format!(
            "[kubernetes]\nimage = \"reg.example/kv@sha256:{DIGEST}\"\n"
        ))
        .unwrap_err();
        assert!(err.message.contains("feature `kubernetes`"), "{err}");
    }
}
