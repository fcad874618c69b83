//! A simulated Pod's volumes, made the way a kubelet makes them: `emptyDir` an empty directory,
//! `secret` and `configMap` the object's keys (read through the API server) written with the
//! kubelet's atomic-writer layout — `..<timestamp>/KEY` files with the volume's mode,
//! `..data -> ..<timestamp>`, and `KEY -> ..data/KEY` links.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{ConfigMap, KeyToPath, Pod, Secret};
use kube::Api;

/// One volume on this machine, by the name the Pod gives it.
#[derive(Debug, Clone)]
pub(crate) struct Volume {
    pub(crate) name: String,
    pub(crate) path: PathBuf,
    /// Secret and config map volumes are always mounted read-only.
    pub(crate) read_only: bool,
}

/// Makes every volume of `pod` below `dir`. Errs with the kubelet's `FailedMount` message.
pub(crate) async fn make(
    client: &kube::Client,
    pod: &Pod,
    dir: &Path,
) -> Result<Vec<Volume>, String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut made = Vec::new();
    for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let path = dir.join(&volume.name);
        let failed = |e: String| {
            format!(
                "MountVolume.SetUp failed for volume \"{}\" : {e}",
                volume.name
            )
        };
        let read_only = if volume.empty_dir.is_some() {
            std::fs::create_dir_all(&path).map_err(|e| failed(e.to_string()))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777))
                .map_err(|e| failed(e.to_string()))?;
            false
        } else if let Some(source) = &volume.secret {
            let name = source.secret_name.clone().unwrap_or_default();
            let secret = Api::<Secret>::namespaced(client.clone(), namespace)
                .get_opt(&name)
                .await
                .map_err(|e| failed(e.to_string()))?
                .ok_or_else(|| failed(format!("secret \"{name}\" not found")))?;
            let data: BTreeMap<String, Vec<u8>> = secret
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect();
            write_atomic(&path, &data, source.items.as_deref(), source.default_mode)
                .map_err(failed)?;
            true
        } else if let Some(source) = &volume.config_map {
            let name = source.name.clone();
            let map = Api::<ConfigMap>::namespaced(client.clone(), namespace)
                .get_opt(&name)
                .await
                .map_err(|e| failed(e.to_string()))?
                .ok_or_else(|| failed(format!("configmap \"{name}\" not found")))?;
            let mut data: BTreeMap<String, Vec<u8>> = map
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.into_bytes()))
                .collect();
            data.extend(
                map.binary_data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0)),
            );
            write_atomic(&path, &data, source.items.as_deref(), source.default_mode)
                .map_err(failed)?;
            true
        } else {
            return Err(failed(
                "the stand-in kubelet supports emptyDir, secret and configMap volumes only".into(),
            ));
        };
        made.push(Volume {
            name: volume.name.clone(),
            path,
            read_only,
        });
    }
    Ok(made)
}

/// The kubelet's layout of `data` (only `items` when given) in `dir`, files with `mode`
/// (the API's default, 0644, when unset).
fn write_atomic(
    dir: &Path,
    data: &BTreeMap<String, Vec<u8>>,
    items: Option<&[KeyToPath]>,
    mode: Option<i32>,
) -> Result<(), String> {
    let io = |e: std::io::Error| e.to_string();
    let chosen: Vec<(String, String, Option<i32>)> = match items {
        Some(items) => items
            .iter()
            .map(|i| {
                data.contains_key(&i.key)
                    .then(|| (i.key.clone(), i.path.clone(), i.mode))
                    .ok_or_else(|| format!("key \"{}\" not found", i.key))
            })
            .collect::<Result<_, _>>()?,
        None => data.keys().map(|k| (k.clone(), k.clone(), None)).collect(),
    };
    let stamp = format!(
        "..{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let versioned = dir.join(&stamp);
    std::fs::create_dir_all(&versioned).map_err(io)?;
    for (key, path, item_mode) in &chosen {
        let file = versioned.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::write(&file, &data[key]).map_err(io)?;
        let mode = item_mode.or(mode).unwrap_or(0o644);
        let mode = u32::try_from(mode).map_err(|_| format!("mode {mode} is negative"))?;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).map_err(io)?;
    }
    std::os::unix::fs::symlink(&stamp, dir.join("..data")).map_err(io)?;
    for (_, path, _) in &chosen {
        let top = path.split('/').next().unwrap_or(path);
        let link = dir.join(top);
        if !link.exists() {
            std::os::unix::fs::symlink(Path::new("..data").join(top), link).map_err(io)?;
        }
    }
    Ok(())
}
