//! A [`SecretSource`] reading a Kubernetes Secret through the API server: the value named `db`
//! is the Secret's key `db`. A host (an agent Pod) no longer mounts every plugin's Secret
//! volume: it reads, per launch, only the keys the grants file grants its plugins — the catalog
//! asks a source only for granted names — and whichever runner starts the plugin (process,
//! gVisor, Pod) delivers only those.
//!
//! The API returns a whole Secret; the other keys are wiped from memory at once. Tighten it at
//! the API too: one Secret per plugin, and a Role granting `get` on exactly those Secrets
//! (`resourceNames`, see `examples/kubernetes/rbac.yaml`).
//!
//! [`SecretSource::fetch`] is synchronous (the catalog calls it while planning a launch), so the
//! source owns a small thread with its own runtime and client: it works from async and
//! blocking callers alike. A client the host passes in (`ClusterAccess::Client`) keeps running
//! on the host's runtime, which must then be multi-threaded (the fetch hands its worker's
//! tasks on while it waits); on a current-thread runtime use `Infer` or `Kubeconfig`.

use std::fmt;
use std::io;
use std::sync::mpsc;
use std::thread;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use secrecy::SecretSlice;
use zeroize::Zeroize as _;

use crate::catalog::secrets::{MAX_VALUE_LEN, SecretSource};
use crate::launch::ClusterAccess;

type Reply = mpsc::Sender<io::Result<Option<SecretSlice<u8>>>>;

/// Values from the keys of one Kubernetes Secret, read through the API server per launch.
///
/// ```no_run
/// use tether_broker::catalog::{KubernetesSecretSource, SecretSource};
/// use tether_broker::launch::ClusterAccess;
/// let source = KubernetesSecretSource::new(ClusterAccess::Infer, "agents", "kv-plugin")?;
/// let password = source.fetch("db-password")?; // only this key leaves the source
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct KubernetesSecretSource {
    namespace: String,
    secret: String,
    requests: mpsc::Sender<(String, Reply)>,
}

impl fmt::Debug for KubernetesSecretSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubernetesSecretSource")
            .field("namespace", &self.namespace)
            .field("secret", &self.secret)
            .finish_non_exhaustive()
    }
}

impl KubernetesSecretSource {
    /// Values are the keys of Secret `secret` in `namespace`, read with `access`'s credentials
    /// (in cluster: the host Pod's service account, which needs `get` on that Secret).
    ///
    /// # Errors
    /// When the source's thread cannot start.
    pub fn new(
        access: ClusterAccess,
        namespace: impl Into<String>,
        secret: impl Into<String>,
    ) -> io::Result<Self> {
        let (namespace, secret) = (namespace.into(), secret.into());
        let (requests, incoming) = mpsc::channel::<(String, Reply)>();
        let (ns, name) = (namespace.clone(), secret.clone());
        thread::Builder::new()
            .name(format!("tether-secrets-{name}"))
            .spawn(move || serve(&access, &ns, &name, &incoming))?;
        Ok(Self {
            namespace,
            secret,
            requests,
        })
    }
}

impl SecretSource for KubernetesSecretSource {
    fn fetch(&self, name: &str) -> io::Result<Option<SecretSlice<u8>>> {
        let ask = || {
            let (reply, answer) = mpsc::channel();
            self.requests
                .send((name.to_owned(), reply))
                .map_err(|_| io::Error::other("the Kubernetes secret source's thread has ended"))?;
            answer
                .recv()
                .map_err(|_| io::Error::other("the Kubernetes secret source's thread has ended"))?
        };
        // A client the host made (`ClusterAccess::Client`) runs its connection's task on the
        // host's runtime: a worker of it blocked here must hand its tasks to another worker,
        // or the answer never comes.
        match tokio::runtime::Handle::try_current() {
            Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(ask)
            }
            _ => ask(),
        }
    }

    fn describe(&self) -> String {
        format!("Kubernetes Secret {}/{}", self.namespace, self.secret)
    }
}

/// The source's thread: one runtime and client, one request at a time, until the source drops.
fn serve(
    access: &ClusterAccess,
    namespace: &str,
    secret: &str,
    incoming: &mpsc::Receiver<(String, Reply)>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            for (_, reply) in incoming {
                let _ = reply.send(Err(io::Error::other(format!(
                    "cannot start the source's runtime: {e}"
                ))));
            }
            return;
        }
    };
    let client = runtime.block_on(crate::launch::runner::kubernetes::client(access));
    for (name, reply) in incoming {
        let answer = match &client {
            Ok(client) => runtime.block_on(fetch(client, namespace, secret, &name)),
            Err(e) => Err(io::Error::other(e.clone())),
        };
        let _ = reply.send(answer);
    }
}

async fn fetch(
    client: &kube::Client,
    namespace: &str,
    secret: &str,
    key: &str,
) -> io::Result<Option<SecretSlice<u8>>> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let object = match secrets.get(secret).await {
        Ok(object) => object,
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(None),
        Err(kube::Error::Api(status)) if status.code == 403 => {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "the host may not `get` the Secret {namespace}/{secret}: RBAC refused it ({}); grant the verb `get` on `secrets` (resourceNames: [{secret}]) to the host's service account — examples/kubernetes/rbac.yaml",
                    status.message
                ),
            ));
        }
        Err(e) => {
            return Err(io::Error::other(format!(
                "reading the Secret {namespace}/{secret}: {e}"
            )));
        }
    };
    let mut data = object.data.unwrap_or_default();
    let value = data.remove(key).map(|v| v.0);
    // Every other key of the Secret is wiped before it is dropped: only the granted one leaves.
    for (_, mut other) in data {
        other.0.zeroize();
    }
    match value {
        Some(value) if value.len() as u64 > MAX_VALUE_LEN => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("`{key}` of Secret {namespace}/{secret} is larger than {MAX_VALUE_LEN} bytes"),
        )),
        Some(value) => Ok(Some(SecretSlice::from(value))),
        None => Ok(None),
    }
}
