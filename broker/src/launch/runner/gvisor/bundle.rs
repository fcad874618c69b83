//! Planning one launch's OCI bundle for runsc: the `config.json` ([`oci::Spec`]) and the
//! mount points to create in the assembled root file system. Pure: every path and value comes
//! in through [`BundleInputs`]; [`gvisor`](super) finds them and writes the result.
//!
//! What the plugin sees: a read-only root holding its binary and the libraries it needs (or the
//! operator's root file system), the operator's read-only allowances at their host paths, its
//! socket directory read-write at [`SOCKET_DIR`], its own delivered secrets/config read-only at
//! [`DELIVERED_DIR`], its state directory read-write at [`STATE_DIR`], and a tmpfs `/tmp`.
//! No capabilities, `noNewPrivileges`, rlimits; namespaces of its own; a system-call filter
//! refusing set-uid and set-gid modes ([`filter`]), as what it writes lands on the host.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::confine::sandbox::Limits;
use crate::launch::runner::gvisor::elf::Closure;
use crate::launch::runner::gvisor::filter;
use crate::launch::runner::gvisor::oci::{self, Mount, Spec};
use crate::launch::runner::options::GvisorOptions;

/// Where the plugin sees its socket directory (`PLUGIN_UNIX_SOCKET_DIR`, `TMPDIR`). Short, so
/// that socket paths stay far below the 108-byte limit.
pub const SOCKET_DIR: &str = "/run/tether/sock";
/// Where the plugin sees its delivered secrets and config files (read-only).
pub const DELIVERED_DIR: &str = "/run/tether/delivered";
/// Where the plugin sees its state directory (read-write, its working directory).
pub const STATE_DIR: &str = "/run/tether/state";
/// The host name inside the sandbox.
pub(crate) const HOSTNAME: &str = "plugin";

/// What a bundle is planned from.
#[derive(Debug)]
pub(crate) struct BundleInputs<'a> {
    /// The plugin's binary on the host (mounted read-only at the same path).
    pub(crate) program: &'a Path,
    /// Its arguments after `argv[0]`.
    pub(crate) args: &'a [OsString],
    /// The plugin's environment, with host paths (rewritten to the plugin's view).
    pub(crate) env: &'a BTreeMap<OsString, OsString>,
    /// The launch's private directory (socket, temporary files).
    pub(crate) private_dir: &'a Path,
    /// The plugin's own delivered secrets/config directory.
    pub(crate) delivered: Option<&'a Path>,
    /// The plugin's state directory.
    pub(crate) state_dir: Option<&'a Path>,
    /// Directories the operator lets the plugin read (and execute), mounted at their paths.
    pub(crate) read_only: &'a [PathBuf],
    /// Where runsc mounts each of `read_only` from (its idmapped view, `grants.rs`); the path
    /// itself where this has no entry for it.
    pub(crate) read_only_sources: &'a [PathBuf],
    /// The interpreter and libraries to mount; empty with an operator root file system.
    pub(crate) libraries: &'a Closure,
    /// The root file system: the bundle's assembled `rootfs`, or the operator's.
    pub(crate) rootfs: &'a Path,
    pub(crate) limits: &'a Limits,
    pub(crate) options: &'a GvisorOptions,
    /// The host's network (granted); else the sandbox gets a network namespace of its own.
    pub(crate) host_network: bool,
    /// The user and group the plugin runs as inside the sandbox (`run_as`, else gVisor's root,
    /// which holds no capability there).
    pub(crate) user: (u32, u32),
}

/// A mount point to create in the assembled root file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MountPoint {
    /// A directory.
    Dir(PathBuf),
    /// An empty file (the target of a file bind mount).
    File(PathBuf),
}

/// The planned bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BundlePlan {
    pub(crate) spec: Spec,
    /// Relative to the root file system; only used for the assembled one.
    pub(crate) mount_points: Vec<MountPoint>,
}

/// A path or value that is not UTF-8, which `config.json` cannot carry.
#[derive(Debug, thiserror::Error)]
#[error(
    "{0:?} is not UTF-8; the OCI bundle of a gVisor plugin can only carry UTF-8 paths and values"
)]
pub(crate) struct NotUtf8(pub(crate) OsString);

/// Plans the bundle of one launch.
pub(crate) fn plan(inputs: &BundleInputs<'_>) -> Result<BundlePlan, NotUtf8> {
    // The plugin's disk inside the sandbox: `/tmp` and `/dev/shm` are each a tmpfs of
    // `disk_mib` (its TMPDIR, the socket directory, is the host's capped tmpfs: `gvisor`).
    let size = format!("size={}m", inputs.limits.disk_mib_or_default());
    let mut mounts = vec![
        special("/proc", "proc", &["nosuid", "noexec", "nodev"]),
        special("/dev", "tmpfs", &["nosuid", "strictatime", "mode=755"]),
        special(
            "/dev/shm",
            "tmpfs",
            &["nosuid", "nodev", "mode=1777", &size],
        ),
        special("/tmp", "tmpfs", &["nosuid", "nodev", "mode=1777", &size]),
    ];
    let mut points = vec![
        MountPoint::Dir("proc".into()),
        MountPoint::Dir("dev".into()),
        MountPoint::Dir("tmp".into()),
    ];
    let mut bind = |mounts: &mut Vec<Mount>,
                    source: &Path,
                    destination: &Path,
                    writable: bool,
                    file: bool|
     -> Result<(), NotUtf8> {
        mounts.push(Mount {
            destination: text(destination.as_os_str())?,
            kind: "bind",
            source: text(source.as_os_str())?,
            options: [
                "rbind",
                if writable { "rw" } else { "ro" },
                "nosuid",
                "nodev",
            ]
            .map(str::to_owned)
            .to_vec(),
        });
        let relative = destination
            .strip_prefix("/")
            .unwrap_or(destination)
            .to_owned();
        points.push(if file {
            MountPoint::File(relative)
        } else {
            MountPoint::Dir(relative)
        });
        Ok(())
    };
    bind(
        &mut mounts,
        inputs.private_dir,
        Path::new(SOCKET_DIR),
        true,
        false,
    )?;
    if let Some(delivered) = inputs.delivered {
        bind(
            &mut mounts,
            delivered,
            Path::new(DELIVERED_DIR),
            false,
            false,
        )?;
    }
    if let Some(state) = inputs.state_dir {
        bind(&mut mounts, state, Path::new(STATE_DIR), true, false)?;
    }
    for (i, dir) in inputs.read_only.iter().enumerate() {
        let source = inputs.read_only_sources.get(i).unwrap_or(dir);
        bind(&mut mounts, source, dir, false, false)?;
    }
    let covered = |path: &Path| inputs.read_only.iter().any(|dir| path.starts_with(dir));
    if !covered(inputs.program) {
        bind(&mut mounts, inputs.program, inputs.program, false, true)?;
    }
    for library in &inputs.libraries.files {
        if !covered(&library.lookup) {
            bind(&mut mounts, &library.source, &library.lookup, false, true)?;
        }
    }

    let mut views = vec![(inputs.private_dir, Path::new(SOCKET_DIR))];
    views.extend(inputs.delivered.map(|d| (d, Path::new(DELIVERED_DIR))));
    views.extend(inputs.state_dir.map(|d| (d, Path::new(STATE_DIR))));
    let mut env = Vec::new();
    for (name, value) in inputs.env {
        let value = rewrite(value, &views);
        env.push(format!("{}={}", text(name)?, text(&value)?));
    }
    if !inputs.libraries.extra_dirs.is_empty() {
        let dirs: Vec<&OsStr> = inputs
            .libraries
            .extra_dirs
            .iter()
            .map(|d| d.as_os_str())
            .collect();
        env.push(format!(
            "LD_LIBRARY_PATH={}",
            text(&dirs.join(OsStr::new(":")))?
        ));
    }
    let mut args = vec![text(inputs.program.as_os_str())?];
    for arg in inputs.args {
        args.push(text(&rewrite(arg, &views))?);
    }

    let mut namespaces = vec!["pid", "ipc", "uts", "mount"];
    if !inputs.host_network {
        namespaces.push("network");
    }
    let spec = Spec {
        oci_version: oci::OCI_VERSION,
        process: oci::Process {
            user: oci::User {
                uid: inputs.user.0,
                gid: inputs.user.1,
            },
            args,
            env,
            cwd: if inputs.state_dir.is_some() {
                STATE_DIR
            } else {
                "/"
            }
            .to_owned(),
            capabilities: oci::Capabilities::default(),
            rlimits: rlimits(inputs.limits),
            no_new_privileges: true,
        },
        root: oci::Root {
            path: text(inputs.rootfs.as_os_str())?,
            readonly: true,
        },
        hostname: HOSTNAME.to_owned(),
        mounts,
        linux: oci::Linux {
            namespaces: namespaces
                .into_iter()
                .map(|kind| oci::Namespace { kind })
                .collect(),
            resources: resources(inputs.options),
            seccomp: filter::plugin_filter(),
        },
    };
    Ok(BundlePlan {
        spec,
        mount_points: points,
    })
}

fn special(destination: &str, kind: &'static str, options: &[&str]) -> Mount {
    Mount {
        destination: destination.to_owned(),
        kind,
        source: kind.to_owned(),
        options: options.iter().map(|o| (*o).to_owned()).collect(),
    }
}

/// `value` with a leading host path of `views` replaced by the plugin's view of it.
fn rewrite(value: &OsStr, views: &[(&Path, &Path)]) -> OsString {
    let path = Path::new(value);
    for (host, plugin) in views {
        if let Ok(rest) = path.strip_prefix(host) {
            return if rest.as_os_str().is_empty() {
                plugin.as_os_str().to_owned()
            } else {
                plugin.join(rest).into_os_string()
            };
        }
    }
    value.to_owned()
}

/// The limits as rlimits, applied by gVisor's kernel: core dumps always off.
fn rlimits(limits: &Limits) -> Vec<oci::Rlimit> {
    let mut out = vec![oci::Rlimit {
        kind: "RLIMIT_CORE",
        hard: 0,
        soft: 0,
    }];
    let mut add = |kind, value: Option<u64>| {
        if let Some(v) = value {
            out.push(oci::Rlimit {
                kind,
                hard: v,
                soft: v,
            });
        }
    };
    add(
        "RLIMIT_AS",
        limits.memory_mib.map(|m| m.saturating_mul(1 << 20)),
    );
    add("RLIMIT_CPU", limits.cpu_seconds);
    add("RLIMIT_NOFILE", limits.open_files);
    add("RLIMIT_NPROC", limits.processes);
    out
}

fn resources(options: &GvisorOptions) -> Option<oci::Resources> {
    let memory = options.memory_mib.map(|mib| oci::Memory {
        limit: i64::try_from(mib.saturating_mul(1 << 20)).unwrap_or(i64::MAX),
    });
    let cpu = options.cpu_millis.map(|millis| oci::Cpu {
        quota: i64::try_from(millis.saturating_mul(100)).unwrap_or(i64::MAX),
        period: 100_000,
    });
    (memory.is_some() || cpu.is_some()).then_some(oci::Resources { memory, cpu })
}

fn text(value: &OsStr) -> Result<String, NotUtf8> {
    value
        .to_str()
        .map(str::to_owned)
        .ok_or_else(|| NotUtf8(value.to_owned()))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::launch::runner::gvisor::elf::Needed;

    struct World {
        env: BTreeMap<OsString, OsString>,
        libraries: Closure,
        limits: Limits,
        options: GvisorOptions,
        host_network: bool,
        read_only: Vec<PathBuf>,
        args: Vec<OsString>,
    }

    fn world() -> World {
        let env = [
            ("PLUGIN_UNIX_SOCKET_DIR", "/tmp/tether-abc"),
            ("TMPDIR", "/tmp/tether-abc"),
            ("TETHER_SECRETS_DIR", "/dev/shm/tether-delivery-1/secrets"),
            ("PATH", "/usr/bin"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
        let libraries = Closure {
            files: BTreeSet::from([Needed {
                lookup: "/lib64/ld-linux-x86-64.so.2".into(),
                source: "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2".into(),
            }]),
            extra_dirs: BTreeSet::new(),
        };
        World {
            env,
            libraries,
            limits: Limits::default().open_files(256),
            options: GvisorOptions::new(),
            host_network: false,
            read_only: vec!["/opt/py".into()],
            args: vec!["/tmp/tether-abc/x".into()],
        }
    }

    fn planned(w: &World, delivered: Option<&Path>) -> BundlePlan {
        plan(&BundleInputs {
            program: Path::new("/opt/plugins/kv"),
            args: &w.args,
            env: &w.env,
            private_dir: Path::new("/tmp/tether-abc"),
            delivered,
            state_dir: Some(Path::new("/var/lib/tether/kv")),
            read_only: &w.read_only,
            read_only_sources: &[],
            libraries: &w.libraries,
            rootfs: Path::new("/run/b/rootfs"),
            limits: &w.limits,
            options: &w.options,
            host_network: w.host_network,
            user: (0, 0),
        })
        .unwrap()
    }

    fn mount<'a>(plan: &'a BundlePlan, destination: &str) -> Option<&'a Mount> {
        plan.spec
            .mounts
            .iter()
            .find(|m| m.destination == destination)
    }

    #[test]
    fn tmp_and_dev_shm_are_tmpfs_mounts_of_the_plugins_disk_cap() {
        let mut w = world();
        let sizes = |plan: &BundlePlan| -> Vec<String> {
            ["/tmp", "/dev/shm"]
                .iter()
                .map(|d| {
                    let m = mount(plan, d).unwrap();
                    assert_eq!(m.kind, "tmpfs");
                    m.options
                        .iter()
                        .find(|o| o.starts_with("size="))
                        .unwrap()
                        .clone()
                })
                .collect()
        };
        let default = format!("size={}m", crate::confine::DEFAULT_DISK_MIB);
        assert_eq!(sizes(&planned(&w, None)), [default.clone(), default]);
        w.limits = Limits::default().disk_mib(16);
        assert_eq!(sizes(&planned(&w, None)), ["size=16m", "size=16m"]);
    }

    #[test]
    fn only_the_socket_and_state_directories_are_writable_besides_tmp() {
        let w = world();
        let plan = planned(&w, Some(Path::new("/dev/shm/tether-delivery-1")));
        let writable: Vec<&str> = plan
            .spec
            .mounts
            .iter()
            .filter(|m| m.kind == "bind" && m.options.iter().any(|o| o == "rw"))
            .map(|m| m.destination.as_str())
            .collect();
        assert_eq!(writable, [SOCKET_DIR, STATE_DIR]);
        assert!(plan.spec.root.readonly);
        assert_eq!(mount(&plan, SOCKET_DIR).unwrap().source, "/tmp/tether-abc");
        assert_eq!(mount(&plan, DELIVERED_DIR).unwrap().options[1], "ro");
        assert_eq!(mount(&plan, "/opt/plugins/kv").unwrap().options[1], "ro");
        assert_eq!(
            mount(&plan, "/lib64/ld-linux-x86-64.so.2").unwrap().source,
            "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
        );
        assert!(
            plan.mount_points
                .contains(&MountPoint::File("opt/plugins/kv".into()))
        );
        assert!(
            plan.mount_points
                .contains(&MountPoint::Dir("run/tether/sock".into()))
        );
    }

    #[test]
    fn the_environment_and_arguments_name_the_plugins_view_of_its_directories() {
        let w = world();
        let plan = planned(&w, Some(Path::new("/dev/shm/tether-delivery-1")));
        let env = &plan.spec.process.env;
        assert!(
            env.contains(&format!("PLUGIN_UNIX_SOCKET_DIR={SOCKET_DIR}")),
            "{env:?}"
        );
        assert!(env.contains(&format!("TMPDIR={SOCKET_DIR}")));
        assert!(env.contains(&format!("TETHER_SECRETS_DIR={DELIVERED_DIR}/secrets")));
        assert!(env.contains(&"PATH=/usr/bin".to_owned()));
        assert_eq!(
            plan.spec.process.args,
            ["/opt/plugins/kv", &format!("{SOCKET_DIR}/x")]
        );
        assert_eq!(plan.spec.process.cwd, STATE_DIR);
    }

    #[test]
    fn no_capability_no_new_privileges_no_network_and_core_dumps_off() {
        let w = world();
        let plan = planned(&w, None);
        let p = &plan.spec.process;
        assert!(p.no_new_privileges);
        assert_eq!(p.capabilities, oci::Capabilities::default());
        assert!(
            plan.spec
                .linux
                .namespaces
                .iter()
                .any(|n| n.kind == "network")
        );
        assert!(p.rlimits.contains(&oci::Rlimit {
            kind: "RLIMIT_CORE",
            hard: 0,
            soft: 0
        }));
        assert!(p.rlimits.contains(&oci::Rlimit {
            kind: "RLIMIT_NOFILE",
            hard: 256,
            soft: 256
        }));
        assert!(
            mount(&plan, DELIVERED_DIR).is_none(),
            "nothing delivered, nothing mounted"
        );
        assert!(plan.spec.linux.resources.is_none());
        let json = serde_json::to_value(&plan.spec).unwrap();
        assert_eq!(json["process"]["noNewPrivileges"], true);
        assert_eq!(json["ociVersion"], oci::OCI_VERSION);
    }

    #[test]
    fn the_host_network_keeps_the_hosts_namespace_and_limits_become_resources() {
        let mut w = world();
        w.options = GvisorOptions::new().memory_mib(64).cpu_millis(500);
        w.host_network = true;
        let plan = planned(&w, None);
        assert!(
            !plan
                .spec
                .linux
                .namespaces
                .iter()
                .any(|n| n.kind == "network")
        );
        let resources = plan.spec.linux.resources.unwrap();
        assert_eq!(resources.memory.unwrap().limit, 64 << 20);
        assert_eq!(resources.cpu.unwrap().quota, 50_000);
    }

    #[test]
    fn files_inside_a_read_only_directory_are_not_mounted_twice() {
        let mut w = world();
        w.read_only = vec!["/opt".into()];
        let plan = planned(&w, None);
        assert!(mount(&plan, "/opt/plugins/kv").is_none());
        assert_eq!(mount(&plan, "/opt").unwrap().options[1], "ro");
    }

    #[test]
    fn a_value_that_is_not_utf8_is_an_error_not_a_mangled_path() {
        use std::os::unix::ffi::OsStringExt as _;
        let mut w = world();
        w.env.insert("X".into(), OsString::from_vec(vec![0xff]));
        let err = plan(&BundleInputs {
            program: Path::new("/p"),
            args: &[],
            env: &w.env,
            private_dir: Path::new("/tmp/t"),
            delivered: None,
            state_dir: None,
            read_only: &[],
            read_only_sources: &[],
            libraries: &w.libraries,
            rootfs: Path::new("/r"),
            limits: &w.limits,
            options: &w.options,
            host_network: w.host_network,
            user: (0, 0),
        })
        .unwrap_err();
        assert!(err.to_string().contains("not UTF-8"));
    }
}
