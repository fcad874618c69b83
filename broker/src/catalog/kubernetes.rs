//! A [`ValueSource`] reading a Kubernetes Secret through the API server: the value named `db`
//! is the Secret's key `db`. A host (an agent Pod) no longer mounts every plugin's Secret
//! volume: it reads, per launch, only the keys the grants file grants its plugins — the catalog
//! asks a source only for granted names — and whichever runner starts the plugin (process,
//! gVisor, Pod) delivers only those.
//!
//! The API returns a whole Secret; the other keys are wiped from memory at once. Tighten it at
//! the API too: one Secret per plugin, and a Role granting `get` on exactly those Secrets
//! (`resourceNames`, see `examples/kubernetes/rbac.yaml`).
//!
//! [`ValueSource::fetch`] is synchronous (the catalog calls it while planning a launch). With
//! [`ClusterAccess::Infer`] or [`ClusterAccess::Kubeconfig`] the source owns a small thread with
//! its own runtime and client, so it works from async and blocking callers alike. A client the
//! host passes in ([`ClusterAccess::Client`]) is used on the runtime the source was made on —
//! its connections' tasks live there, so they must never be started on a runtime that stops
//! being driven —, which must then be multi-threaded when `fetch` is called from inside it.

use std::fmt;
use std::io;
use std::sync::{Arc, mpsc};
use std::thread;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use secrecy::SecretSlice;
use tokio::runtime::{Handle, RuntimeFlavor};
use zeroize::Zeroize as _;

use crate::catalog::sources::{MAX_VALUE_LEN, ValueSource};
use crate::launch::ClusterAccess;

type Answer = io::Result<Option<SecretSlice<u8>>>;
type Reply = mpsc::Sender<Answer>;

/// Where a fetch runs.
enum Backend {
    /// The source's own thread, runtime and client.
    Own(mpsc::Sender<(String, Reply)>),
    /// The host's client, on the host's runtime (where its connections' tasks run).
    Host {
        client: Arc<kube::Client>,
        runtime: Handle,
    },
}

/// Values from the keys of one Kubernetes Secret, read through the API server per launch.
///
/// ```no_run
/// use tether_broker::catalog::{KubernetesValueSource, ValueSource};
/// use tether_broker::launch::ClusterAccess;
/// let source = KubernetesValueSource::new(ClusterAccess::Infer, "agents", "kv-plugin")?;
/// let password = source.fetch("db-password")?; // only this key leaves the source
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct KubernetesValueSource {
    namespace: String,
    secret: String,
    backend: Backend,
}

impl fmt::Debug for KubernetesValueSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubernetesValueSource")
            .field("namespace", &self.namespace)
            .field("secret", &self.secret)
            .finish_non_exhaustive()
    }
}

impl KubernetesValueSource {
    /// Values are the keys of Secret `secret` in `namespace`, read with `access`'s credentials
    /// (in cluster: the host Pod's service account, which needs `get` on that Secret).
    ///
    /// # Errors
    /// When the source's thread cannot start, or `access` is a [`ClusterAccess::Client`] and
    /// this is not called on a Tokio runtime (the one the client's requests will run on).
    pub fn new(
        access: ClusterAccess,
        namespace: impl Into<String>,
        secret: impl Into<String>,
    ) -> io::Result<Self> {
        let (namespace, secret) = (namespace.into(), secret.into());
        let backend = match access {
            ClusterAccess::Client(client) => Backend::Host {
                client,
                runtime: Handle::try_current().map_err(|_| {
                    io::Error::other(
                        "a Kubernetes secret source with the host's client (ClusterAccess::Client) is made on the Tokio runtime that client runs on: call KubernetesValueSource::new from it",
                    )
                })?,
            },
            access => {
                let (requests, incoming) = mpsc::channel::<(String, Reply)>();
                let (ns, name) = (namespace.clone(), secret.clone());
                thread::Builder::new()
                    .name(format!("tether-secrets-{name}"))
                    .spawn(move || serve(&access, &ns, &name, &incoming))?;
                Backend::Own(requests)
            }
        };
        Ok(Self {
            namespace,
            secret,
            backend,
        })
    }
}

impl ValueSource for KubernetesValueSource {
    fn fetch(&self, name: &str) -> Answer {
        let ended = || io::Error::other("the Kubernetes secret source's thread has ended");
        let (reply, answer) = mpsc::channel();
        match &self.backend {
            Backend::Own(requests) => requests
                .send((name.to_owned(), reply))
                .map_err(|_| ended())?,
            Backend::Host { client, runtime } => {
                // A current-thread runtime waiting here could never run the request.
                if Handle::try_current().is_ok_and(|current| {
                    current.id() == runtime.id()
                        && current.runtime_flavor() == RuntimeFlavor::CurrentThread
                }) {
                    return Err(io::Error::other(format!(
                        "{}: a fetch with the host's client from its own current-thread runtime would wait for itself; use a multi-threaded runtime, or ClusterAccess::Infer or Kubeconfig",
                        self.describe()
                    )));
                }
                let (client, namespace, secret, name) = (
                    Arc::clone(client),
                    self.namespace.clone(),
                    self.secret.clone(),
                    name.to_owned(),
                );
                runtime.spawn(async move {
                    let _ = reply.send(fetch(&client, &namespace, &secret, &name).await);
                });
            }
        }
        let wait = || answer.recv().map_err(|_| ended())?;
        // A worker of a multi-threaded runtime blocked here hands its tasks to another worker
        // (the request may be one of them).
        match Handle::try_current() {
            Ok(current) if current.runtime_flavor() == RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(wait)
            }
            _ => wait(),
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
