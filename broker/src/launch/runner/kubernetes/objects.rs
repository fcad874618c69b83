//! The objects one Pod launch makes, planned without IO: the Pod (one container running the
//! plugin behind `tether-pod-shim`, hardened as `docs/kubernetes.md` says), and a Secret and a
//! ConfigMap holding exactly the granted values, mounted read-only where the protocol's
//! `TETHER_SECRETS_DIR` / `TETHER_CONFIG_DIR` say.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use secrecy::{ExposeSecret as _, SecretSlice};
use serde_json::{Value, json};
use tether_proto::env as protocol;

use crate::launch::runner::options::check_pinned;

use super::options::{
    Connection, HOST_LABEL, KubernetesOptions, MANAGED_BY, MANAGED_BY_LABEL, PLUGIN_LABEL,
    POD_CONFIG_DIR, POD_SECRETS_DIR, POD_TMP_DIR, POD_WORK_DIR, SHIM_IN_SHIM_IMAGE,
    SHIM_INSTALL_DIR,
};

/// The plugin's container's name (the log stream's).
pub(crate) const CONTAINER: &str = "plugin";

/// How much memory the Pod's `emptyDir` for `TMPDIR` and sockets may use.
const TMP_SIZE_LIMIT: &str = "64Mi";

/// What a launch contributes to its objects.
#[derive(Debug)]
pub(crate) struct Inputs<'a> {
    pub(crate) options: &'a KubernetesOptions,
    /// The Pod's name (also the Secret's and the ConfigMap's).
    pub(crate) name: &'a str,
    pub(crate) namespace: &'a str,
    /// The plugin's name (a label).
    pub(crate) plugin: &'a str,
    /// The command in the image, and its arguments.
    pub(crate) program: &'a str,
    pub(crate) args: Vec<String>,
    /// The plan's environment; only the protocol's variables, the cookie and `explicit` pass.
    pub(crate) env: &'a BTreeMap<OsString, OsString>,
    pub(crate) cookie: &'a str,
    pub(crate) explicit: Vec<String>,
    pub(crate) secrets: &'a [(String, SecretSlice<u8>)],
    pub(crate) config: &'a [(String, SecretSlice<u8>)],
    pub(crate) terminate_grace: Duration,
    /// Whether the host reaches the Pod at its IP (else through a port-forward).
    pub(crate) pod_ip: bool,
}

/// A launch's objects.
#[derive(Debug)]
pub(crate) struct Planned {
    pub(crate) pod: Pod,
    pub(crate) secret: Option<Secret>,
    pub(crate) config: Option<ConfigMap>,
    /// The address the shim announces (what the host translates).
    pub(crate) announced: SocketAddr,
}

/// Why a launch cannot be planned: the problem, for the runner's error.
pub(crate) fn plan(inputs: &Inputs<'_>) -> Result<Planned, String> {
    let options = inputs.options;
    check_pinned(&options.image)?;
    if !inputs.program.starts_with('/') {
        return Err(format!(
            "the plugin's command `{}` must be an absolute path in the image {}",
            inputs.program, options.image
        ));
    }
    let (shim, init) = match (&options.shim_image, &options.shim_path) {
        (Some(image), _) => {
            check_pinned(image)?;
            let init = json!({
                "name": "tether-pod-shim",
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": [SHIM_IN_SHIM_IMAGE, "install", SHIM_INSTALL_DIR],
                "securityContext": container_security(),
                "volumeMounts": [{"name": "tether-bin", "mountPath": SHIM_INSTALL_DIR}],
            });
            (format!("{SHIM_INSTALL_DIR}/tether-pod-shim"), Some(init))
        }
        (None, Some(path)) => (path.clone(), None),
        (None, None) => {
            return Err(
                "the Pod runner needs tether-pod-shim in the Pod: set KubernetesOptions::shim_image (an image with /tether-pod-shim, built from sdk-rust/pod-shim) or shim_path (where the plugin's image has it)".into(),
            );
        }
    };
    let ip = if inputs.pod_ip {
        Ipv4Addr::UNSPECIFIED
    } else {
        Ipv4Addr::LOCALHOST
    };
    let announced = SocketAddr::from((ip, options.port));
    let labels = labels(inputs);
    let mut command = vec![
        shim,
        "run".into(),
        "--listen".into(),
        announced.to_string(),
        "--".into(),
        inputs.program.to_owned(),
    ];
    command.extend(inputs.args.iter().cloned());

    let mut volumes = vec![
        json!({"name": "tether-tmp", "emptyDir": {"medium": "Memory", "sizeLimit": TMP_SIZE_LIMIT}}),
        json!({"name": "tether-work", "emptyDir": {}}),
    ];
    let mut mounts = vec![
        json!({"name": "tether-tmp", "mountPath": POD_TMP_DIR}),
        json!({"name": "tether-work", "mountPath": POD_WORK_DIR}),
    ];
    if init.is_some() {
        volumes.push(json!({"name": "tether-bin", "emptyDir": {"medium": "Memory"}}));
        mounts.push(json!({"name": "tether-bin", "mountPath": SHIM_INSTALL_DIR, "readOnly": true}));
    }
    if !inputs.secrets.is_empty() {
        volumes.push(json!({"name": "tether-secrets", "secret": {"secretName": inputs.name, "defaultMode": 0o400}}));
        mounts.push(
            json!({"name": "tether-secrets", "mountPath": POD_SECRETS_DIR, "readOnly": true}),
        );
    }
    if !inputs.config.is_empty() {
        volumes.push(json!({"name": "tether-config", "configMap": {"name": inputs.name, "defaultMode": 0o400}}));
        mounts
            .push(json!({"name": "tether-config", "mountPath": POD_CONFIG_DIR, "readOnly": true}));
    }
    let mut resources = json!({});
    for (key, quantity) in [
        ("memory", &options.memory_limit),
        ("cpu", &options.cpu_limit),
    ] {
        if let Some(q) = quantity {
            resources["limits"][key] = json!(q);
            resources["requests"][key] = json!(q);
        }
    }
    let mut container = json!({
        "name": CONTAINER,
        "image": options.image,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "workingDir": POD_WORK_DIR,
        "env": environment(inputs),
        "ports": [{"name": "tether", "containerPort": options.port, "protocol": "TCP"}],
        "securityContext": container_security(),
        "volumeMounts": mounts,
        "resources": resources,
    });
    if container["resources"]
        .as_object()
        .is_some_and(serde_json::Map::is_empty)
    {
        container.as_object_mut().map(|c| c.remove("resources"));
    }
    let mut spec = json!({
        "restartPolicy": "Never",
        "automountServiceAccountToken": false,
        "enableServiceLinks": false,
        "terminationGracePeriodSeconds": inputs.terminate_grace.as_secs().max(1),
        "securityContext": {
            "runAsNonRoot": true,
            "runAsUser": options.run_as_user,
            "runAsGroup": options.run_as_user,
            "fsGroup": options.run_as_user,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": volumes,
    });
    if let Some(init) = init {
        spec["initContainers"] = json!([init]);
    }
    if !options.node_selector.is_empty() {
        spec["nodeSelector"] = json!(options.node_selector);
    }
    if let Some(class) = &options.runtime_class {
        spec["runtimeClassName"] = json!(class);
    }
    if let Some(account) = &options.service_account {
        spec["serviceAccountName"] = json!(account);
    }
    let metadata = metadata(inputs, &labels);
    let pod =
        object(json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}))?;
    let secret = (!inputs.secrets.is_empty())
        .then(|| {
            let mut secret: Secret = object(json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": metadata, "type": "Opaque", "immutable": true}))?;
            secret.data = Some(values(inputs.secrets));
            Ok::<_, String>(secret)
        })
        .transpose()?;
    let config = (!inputs.config.is_empty())
        .then(|| {
            let mut map: ConfigMap = object(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": metadata, "immutable": true}))?;
            map.binary_data = Some(values(inputs.config));
            Ok::<_, String>(map)
        })
        .transpose()?;
    Ok(Planned {
        pod,
        secret,
        config,
        announced,
    })
}

/// Whether the host reaches the Pod at its IP under `connection`, given whether it runs in a
/// cluster.
pub(crate) fn uses_pod_ip(connection: Connection, in_cluster: bool) -> bool {
    match connection {
        Connection::PodIp => true,
        Connection::PortForward => false,
        Connection::Auto => in_cluster,
    }
}

fn container_security() -> Value {
    json!({
        "runAsNonRoot": true,
        "readOnlyRootFilesystem": true,
        "allowPrivilegeEscalation": false,
        "privileged": false,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    })
}

fn labels(inputs: &Inputs<'_>) -> BTreeMap<String, String> {
    let mut labels = inputs.options.labels.clone();
    labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
    labels.insert(PLUGIN_LABEL.into(), label_value(inputs.plugin));
    if let Some(id) = inputs.options.identity() {
        labels.insert(HOST_LABEL.into(), label_value(id));
    }
    labels
}

fn metadata(inputs: &Inputs<'_>, labels: &BTreeMap<String, String>) -> Value {
    let mut metadata =
        json!({"name": inputs.name, "namespace": inputs.namespace, "labels": labels});
    if let Some(owner) = &inputs.options.owner {
        metadata["ownerReferences"] = json!([{
            "apiVersion": owner.api_version, "kind": owner.kind, "name": owner.name,
            "uid": owner.uid, "blockOwnerDeletion": true,
        }]);
    }
    metadata
}

/// The container's environment: the protocol's variables with the Pod's paths, nothing else
/// of the host's.
fn environment(inputs: &Inputs<'_>) -> Value {
    let mut env: BTreeMap<String, String> = inputs
        .env
        .iter()
        .filter_map(|(k, v)| Some((k.to_str()?.to_owned(), v.to_str()?.to_owned())))
        .filter(|(k, _)| {
            protocol::ALL.contains(&k.as_str()) || k == inputs.cookie || inputs.explicit.contains(k)
        })
        .collect();
    env.insert(protocol::UNIX_SOCKET_DIR.into(), POD_TMP_DIR.into());
    env.insert(protocol::TMPDIR.into(), POD_TMP_DIR.into());
    env.insert(protocol::MULTIPLEX_GRPC.into(), "true".into());
    env.remove(protocol::UNIX_SOCKET_GROUP);
    for (var, dir, present) in [
        (
            protocol::SECRETS_DIR,
            POD_SECRETS_DIR,
            !inputs.secrets.is_empty(),
        ),
        (
            protocol::CONFIG_DIR,
            POD_CONFIG_DIR,
            !inputs.config.is_empty(),
        ),
    ] {
        if present {
            env.insert(var.into(), dir.into());
        } else {
            env.remove(var);
        }
    }
    Value::Array(
        env.into_iter()
            .map(|(name, value)| json!({"name": name, "value": value}))
            .collect(),
    )
}

fn values(values: &[(String, SecretSlice<u8>)]) -> BTreeMap<String, ByteString> {
    values
        .iter()
        .map(|(name, value)| (name.clone(), ByteString(value.expose_secret().to_vec())))
        .collect()
}

fn object<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, String> {
    serde_json::from_value(value).map_err(|e| format!("planning the Pod: {e}"))
}

/// A label value from `text`: at most 63 of its letters, digits, `-`, `_` and `.`, starting
/// and ending with a letter or digit.
pub(crate) fn label_value(text: &str) -> String {
    let kept: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    kept.trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
}

/// A DNS-label name for a launch of `plugin`: `tether-<plugin>-<suffix>`.
pub(crate) fn pod_name(plugin: &str, suffix: &str) -> String {
    let stem: String = plugin
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    let stem = stem.trim_matches('-');
    if stem.is_empty() {
        format!("tether-{suffix}")
    } else {
        format!("tether-{stem}-{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IMAGE: &str = "registry.example/kv@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const SHIM: &str = "registry.example/shim@sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";

    fn env() -> BTreeMap<OsString, OsString> {
        [
            ("BASIC_PLUGIN", "hello"),
            ("PLUGIN_PROTOCOL_VERSIONS", "1"),
            ("PLUGIN_CLIENT_CERT", "CERT"),
            ("PLUGIN_UNIX_SOCKET_DIR", "/tmp/tether-host-private"),
            ("TMPDIR", "/tmp/tether-host-private"),
            ("TETHER_SECRETS_DIR", "/dev/shm/tether-delivery-x/secrets"),
            ("PATH", "/usr/bin:/bin"),
            ("HOME", "/root"),
            ("EXPLICIT", "yes"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
    }

    fn planned(
        options: &KubernetesOptions,
        secrets: &[(String, SecretSlice<u8>)],
        pod_ip: bool,
    ) -> Result<Planned, String> {
        let env = env();
        plan(&Inputs {
            options,
            name: "tether-kv-abc",
            namespace: "agents",
            plugin: "kv",
            program: "/plugin/kv",
            args: vec!["--verbose".into()],
            env: &env,
            cookie: "BASIC_PLUGIN",
            explicit: vec!["EXPLICIT".into()],
            secrets,
            config: &[],
            terminate_grace: Duration::from_secs(2),
            pod_ip,
        })
    }

    fn json_of<T: serde::Serialize>(value: &T) -> Value {
        serde_json::to_value(value).unwrap()
    }

    #[test]
    fn the_pod_runs_the_plugin_behind_the_shim_hardened_with_only_the_protocols_environment() {
        let options = KubernetesOptions::new(IMAGE)
            .shim_image(SHIM)
            .runtime_class("gvisor");
        let planned = planned(&options, &[], false).unwrap();
        let pod = json_of(&planned.pod);
        let spec = &pod["spec"];
        assert_eq!(spec["restartPolicy"], "Never");
        assert_eq!(spec["automountServiceAccountToken"], false);
        assert_eq!(spec["enableServiceLinks"], false);
        assert_eq!(spec["runtimeClassName"], "gvisor");
        assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            spec["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        let container = &spec["containers"][0];
        assert_eq!(container["image"], IMAGE);
        assert_eq!(
            container["command"],
            json!([
                "/run/tether/bin/tether-pod-shim",
                "run",
                "--listen",
                "127.0.0.1:7070",
                "--",
                "/plugin/kv",
                "--verbose"
            ])
        );
        let security = &container["securityContext"];
        assert_eq!(security["readOnlyRootFilesystem"], true);
        assert_eq!(security["allowPrivilegeEscalation"], false);
        assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
        let names: Vec<&str> = container["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "BASIC_PLUGIN",
                "EXPLICIT",
                "PLUGIN_CLIENT_CERT",
                "PLUGIN_MULTIPLEX_GRPC",
                "PLUGIN_PROTOCOL_VERSIONS",
                "PLUGIN_UNIX_SOCKET_DIR",
                "TMPDIR"
            ],
            "no PATH or HOME of the host's, no secrets directory when nothing was granted"
        );
        assert_eq!(spec["initContainers"][0]["image"], SHIM);
        assert_eq!(planned.announced, "127.0.0.1:7070".parse().unwrap());
        assert_eq!(pod["metadata"]["labels"][MANAGED_BY_LABEL], MANAGED_BY);
        assert!(planned.secret.is_none() && planned.config.is_none());
    }

    #[test]
    fn the_secret_holds_exactly_the_granted_values_mounted_read_only_and_owned_like_the_pod() {
        let options = KubernetesOptions::new(IMAGE)
            .shim_path("/usr/local/bin/tether-pod-shim")
            .owner(super::super::options::Owner::pod("agent-0", "uid-1"));
        let secrets = vec![(
            "db-password".to_owned(),
            SecretSlice::from(b"s3cret".to_vec()),
        )];
        let planned = planned(&options, &secrets, true).unwrap();
        let secret = planned.secret.unwrap();
        assert_eq!(
            secret.data.as_ref().unwrap().keys().collect::<Vec<_>>(),
            ["db-password"]
        );
        assert_eq!(secret.data.unwrap()["db-password"].0, b"s3cret");
        let pod = json_of(&planned.pod);
        assert_eq!(pod["spec"]["volumes"][2]["secret"]["defaultMode"], 0o400);
        assert_eq!(
            pod["spec"]["containers"][0]["volumeMounts"][2]["mountPath"],
            POD_SECRETS_DIR
        );
        assert_eq!(
            pod["spec"]["containers"][0]["volumeMounts"][2]["readOnly"],
            true
        );
        assert_eq!(pod["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        assert_eq!(secret.metadata.owner_references.unwrap()[0].uid, "uid-1");
        assert_eq!(pod["metadata"]["labels"][HOST_LABEL], "uid-1");
        assert_eq!(
            planned.announced,
            "0.0.0.0:7070".parse().unwrap(),
            "reached at the Pod's IP"
        );
        assert!(pod["spec"].get("initContainers").is_none());
    }

    #[test]
    fn an_image_not_pinned_by_digest_a_relative_command_or_no_shim_is_refused() {
        let tag = KubernetesOptions::new("registry.example/kv:latest").shim_image(SHIM);
        assert!(
            planned(&tag, &[], false)
                .unwrap_err()
                .contains("not pinned by digest")
        );
        let no_shim = KubernetesOptions::new(IMAGE);
        assert!(
            planned(&no_shim, &[], false)
                .unwrap_err()
                .contains("tether-pod-shim")
        );
        let env = env();
        let relative = plan(&Inputs {
            options: &KubernetesOptions::new(IMAGE).shim_image(SHIM),
            name: "n",
            namespace: "ns",
            plugin: "p",
            program: "kv",
            args: vec![],
            env: &env,
            cookie: "BASIC_PLUGIN",
            explicit: vec![],
            secrets: &[],
            config: &[],
            terminate_grace: Duration::from_secs(1),
            pod_ip: false,
        });
        assert!(relative.unwrap_err().contains("absolute path"));
    }

    #[test]
    fn names_and_label_values_are_what_kubernetes_accepts() {
        assert_eq!(pod_name("KV Plugin_2", "x1"), "tether-kv-plugin-2-x1");
        assert_eq!(pod_name("---", "x1"), "tether-x1");
        assert_eq!(label_value("-kv plugin/2."), "kv-plugin-2");
        assert_eq!(label_value(&"a".repeat(80)).len(), 63);
    }
}
