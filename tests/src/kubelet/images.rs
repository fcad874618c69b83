//! The stand-in kubelet's "registry": images the tests run, each a set of local files placed at
//! paths inside the container, named by a digest of their contents like a pushed image
//! (`tether.test/NAME@sha256:HEX`). An image the stand-in does not know cannot be pulled.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sha2::{Digest as _, Sha256};

/// The registry host of the tests' images.
pub const REGISTRY: &str = "tether.test";

/// The user an image runs as when the Pod does not say (`USER` of a distroless image).
pub const IMAGE_USER: i64 = 65532;

/// One image: files (or directories) bound read-only into the container.
#[derive(Debug, Clone)]
pub struct Image {
    /// `(path inside the container, path on this machine)`.
    pub files: Vec<(PathBuf, PathBuf)>,
    /// The command when the container does not give one (`ENTRYPOINT`).
    pub entrypoint: Vec<String>,
    /// The user it runs as when the Pod does not say.
    pub user: i64,
}

/// The images the stand-in can "pull", by reference.
#[derive(Debug, Clone, Default)]
pub struct Images {
    known: Arc<Mutex<HashMap<String, Image>>>,
}

impl Images {
    /// Adds an image of `files` called `name`; returns its pinned reference.
    ///
    /// # Panics
    /// When a file cannot be read (a test setup error).
    pub fn add(&self, name: &str, files: &[(&str, &Path)], entrypoint: &[&str]) -> String {
        let mut digest = Sha256::new();
        for (inside, host) in files {
            digest.update(inside.as_bytes());
            hash_path(&mut digest, host);
        }
        let reference = format!("{REGISTRY}/{name}@sha256:{}", hex(&digest.finalize()));
        let image = Image {
            files: files
                .iter()
                .map(|(inside, host)| (PathBuf::from(inside), host.to_path_buf()))
                .collect(),
            entrypoint: entrypoint.iter().map(|s| (*s).to_owned()).collect(),
            user: IMAGE_USER,
        };
        self.known
            .lock()
            .expect("images lock")
            .insert(reference.clone(), image);
        reference
    }

    /// The image `reference` names, if it was added.
    #[must_use]
    pub fn pull(&self, reference: &str) -> Option<Image> {
        self.known
            .lock()
            .expect("images lock")
            .get(reference)
            .cloned()
    }
}

/// A reference to an image that exists nowhere (pulling it fails).
#[must_use]
pub fn unpullable(name: &str) -> String {
    format!("{REGISTRY}/{name}@sha256:{}", "0".repeat(64))
}

fn hash_path(digest: &mut Sha256, path: &Path) {
    if path.is_dir() {
        // A directory (an interpreter's prefix) is named by its path: hashing all of it would
        // read hundreds of megabytes for nothing the tests compare.
        digest.update(path.as_os_str().as_encoded_bytes());
    } else {
        let bytes =
            std::fs::read(path).unwrap_or_else(|e| panic!("image file {}: {e}", path.display()));
        digest.update(&bytes);
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
