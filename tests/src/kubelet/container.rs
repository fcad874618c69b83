//! One container of a simulated Pod: `pod-container run` (this crate's binary) with the
//! container's image files, volume mounts, user, environment and command; its stdout and stderr
//! written to a log file in the CRI format a container runtime writes (`TIME STREAM F LINE`),
//! which kwok's `Logs` resource serves through the API server.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod, SecurityContext};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::Mutex;

use super::images::Image;
use super::volumes::Volume;

/// The longest line a CRI log entry holds; longer output is split into partial (`P`) entries.
const MAX_LOG_LINE: usize = 16 * 1024;

/// A started container.
#[derive(Debug)]
pub(crate) struct Running {
    pub(crate) child: Child,
    /// The pid whose namespaces are the container's (`pod-container run` itself).
    pub(crate) pid: u32,
    pub(crate) log: PathBuf,
    pub(crate) loggers: Vec<tokio::task::JoinHandle<()>>,
}

/// What the kubelet refuses before starting a container (`CreateContainerConfigError`).
#[derive(Debug)]
pub(crate) struct ConfigError(pub(crate) String);

/// Starts `container` of `pod`. `dir` is this container's own directory (its root mount point
/// and log file go there).
pub(crate) fn start(
    runtime: &Path,
    pod: &Pod,
    pod_ip: &str,
    container: &Container,
    image: &Image,
    volumes: &[Volume],
    dir: &Path,
) -> Result<Result<Running, String>, ConfigError> {
    let spec = pod.spec.as_ref();
    let pod_security = spec.and_then(|s| s.security_context.as_ref());
    let own = container.security_context.as_ref();
    let uid = own
        .and_then(|s| s.run_as_user)
        .or_else(|| pod_security.and_then(|s| s.run_as_user))
        .unwrap_or(image.user);
    let gid = own
        .and_then(|s| s.run_as_group)
        .or_else(|| pod_security.and_then(|s| s.run_as_group))
        .unwrap_or(uid);
    let non_root = own
        .and_then(|s| s.run_as_non_root)
        .or_else(|| pod_security.and_then(|s| s.run_as_non_root))
        .unwrap_or(false);
    if non_root && uid == 0 {
        return Err(ConfigError(
            "container has runAsNonRoot and image will run as root".into(),
        ));
    }
    let root = dir.join("rootfs");
    let log = dir.join("container.log");
    let spawned = (|| {
        std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
        let mut command = Command::new(runtime);
        command.arg("run").arg("--root").arg(&root);
        command.args(["--uid", &uid.to_string(), "--gid", &gid.to_string()]);
        if own.and_then(|s: &SecurityContext| s.read_only_root_filesystem) == Some(true) {
            command.arg("--read-only-root");
        }
        if let Some(dir) = &container.working_dir {
            command.args(["--workdir", dir]);
        }
        for (inside, host) in &image.files {
            command.arg("--bind").arg(bind_arg(host, inside, true));
        }
        for mount in container.volume_mounts.iter().flatten() {
            let volume = volumes
                .iter()
                .find(|v| v.name == mount.name)
                .ok_or_else(|| format!("volume \"{}\" is not in the Pod", mount.name))?;
            let read_only = volume.read_only || mount.read_only == Some(true);
            command.arg("--bind").arg(bind_arg(
                &volume.path,
                Path::new(&mount.mount_path),
                read_only,
            ));
        }
        for var in container.env.iter().flatten() {
            let value = match (&var.value, &var.value_from) {
                (Some(value), _) => value.clone(),
                (None, Some(from)) => {
                    match from.field_ref.as_ref().map(|f| f.field_path.as_str()) {
                        Some("status.podIP") => pod_ip.to_owned(),
                        Some("metadata.name") => pod.metadata.name.clone().unwrap_or_default(),
                        Some("metadata.namespace") => {
                            pod.metadata.namespace.clone().unwrap_or_default()
                        }
                        Some("spec.nodeName") => {
                            spec.and_then(|s| s.node_name.clone()).unwrap_or_default()
                        }
                        other => {
                            return Err(format!(
                                "the stand-in kubelet cannot resolve env {} from {other:?}",
                                var.name
                            ));
                        }
                    }
                }
                (None, None) => String::new(),
            };
            command.arg("--env").arg(format!("{}={value}", var.name));
        }
        command.arg("--");
        let argv: Vec<String> = match &container.command {
            Some(cmd) if !cmd.is_empty() => cmd.clone(),
            _ => image.entrypoint.clone(),
        };
        command.args(argv).args(container.args.iter().flatten());
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|e| format!("{}: {e}", runtime.display()))?;
        let pid = child.id().ok_or("the container exited at once")?;
        let file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let file = Arc::new(Mutex::new(tokio::fs::File::from_std(file)));
        let loggers = vec![
            tokio::spawn(write_cri(child.stdout.take(), "stdout", Arc::clone(&file))),
            tokio::spawn(write_cri(child.stderr.take(), "stderr", file)),
        ];
        Ok(Running {
            child,
            pid,
            log: log.clone(),
            loggers,
        })
    })();
    Ok(spawned)
}

fn bind_arg(host: &Path, inside: &Path, read_only: bool) -> String {
    format!(
        "{}:{}{}",
        host.display(),
        inside.display(),
        if read_only { ":ro" } else { "" }
    )
}

/// Copies `stream` into the CRI log `file`, one entry per line.
async fn write_cri<R: AsyncRead + Unpin>(
    stream: Option<R>,
    name: &'static str,
    file: Arc<Mutex<tokio::fs::File>>,
) {
    let Some(stream) = stream else { return };
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let complete = line.last() == Some(&b'\n');
        let body = if complete {
            &line[..line.len() - 1]
        } else {
            &line[..]
        };
        let chunks: Vec<&[u8]> = if body.is_empty() {
            vec![body]
        } else {
            body.chunks(MAX_LOG_LINE).collect()
        };
        let mut entry = Vec::new();
        for (i, chunk) in chunks.iter().enumerate() {
            let last = i + 1 == chunks.len();
            let tag = if last && complete { "F" } else { "P" };
            entry.extend_from_slice(format!("{} {name} {tag} ", now_rfc3339()).as_bytes());
            entry.extend_from_slice(chunk);
            entry.push(b'\n');
        }
        let mut file = file.lock().await;
        if file
            .write_all(&entry)
            .await
            .and(file.flush().await)
            .is_err()
        {
            return;
        }
    }
}

/// Now, as the CRI writes it: RFC 3339 with nanoseconds, UTC.
fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}
