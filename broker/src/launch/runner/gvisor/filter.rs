//! The system-call filter gVisor's kernel applies to a gVisor plugin (the bundle's
//! `linux.seccomp`, loaded by runsc `--oci-seccomp`). Pure data.
//!
//! gVisor's kernel stands between the plugin and the host's, so the process runner's deny-list
//! (`crate::confine::seccomp`) is not repeated here: what the plugin does to gVisor's kernel
//! stays in the sandbox. What does not are the files it writes in its bind-mounted
//! directories (its working directory, its socket directory): runsc's gofer makes them on the
//! host as host root, owned by the plugin's user in the sandbox — gVisor's root (host root)
//! unless it runs as another user. A set-uid or set-gid mode on one of them is a host
//! executable running as that owner for any local user who can reach it, after the plugin is
//! gone. So the modes are refused, as by the process runner's filter: `chmod`, `fchmod`,
//! `fchmodat`, `open`, `openat`, `creat`, `mknod`, `mknodat` with `S_ISUID` or `S_ISGID` in
//! the mode fail with `EPERM`.
//!
//! The rest of what would loosen the host is refused already (checked by the `gvisor` tests):
//! a device node and giving a file to another owner by gVisor's kernel, as the plugin holds no
//! capability there (`CAP_MKNOD`, `CAP_CHOWN`); a file capability (`security.capability`) by
//! runsc's gofer, which supports no such attribute (`EOPNOTSUPP`, runsc 20221219).

use crate::launch::runner::gvisor::oci::{Seccomp, SeccompArg, SeccompSyscall};

/// The calls that take a file mode, with the index of their mode argument (x86-64 and
/// aarch64 names; runsc ignores a name its architecture does not have).
const MODE_CALLS: &[(&str, u32)] = &[
    ("chmod", 1),
    ("fchmod", 1),
    ("fchmodat", 2),
    ("open", 2),
    ("openat", 3),
    ("creat", 1),
    ("mknod", 1),
    ("mknodat", 2),
];

/// The mode bits refused: set-uid and set-gid.
const REFUSED_BITS: [u32; 2] = [libc::S_ISUID, libc::S_ISGID];

/// The filter of every gVisor plugin: everything allowed but a set-uid or set-gid mode.
pub(crate) fn plugin_filter() -> Seccomp {
    Seccomp {
        default_action: "SCMP_ACT_ALLOW",
        syscalls: MODE_CALLS
            .iter()
            .map(|&(name, index)| SeccompSyscall {
                names: vec![name],
                // EPERM, the errno of a missing privilege.
                action: "SCMP_ACT_ERRNO",
                // Two conditions on one argument: either matches (runc's and runsc's rule).
                args: REFUSED_BITS
                    .iter()
                    .map(|&bit| SeccompArg {
                        index,
                        value: u64::from(bit),
                        value_two: u64::from(bit),
                        op: "SCMP_CMP_MASKED_EQ",
                    })
                    .collect(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_taking_call_refuses_set_uid_and_set_gid_and_nothing_else_is_refused() {
        let filter = plugin_filter();
        assert_eq!(filter.default_action, "SCMP_ACT_ALLOW");
        let names: Vec<&str> = filter
            .syscalls
            .iter()
            .flat_map(|s| s.names.clone())
            .collect();
        assert_eq!(
            names,
            [
                "chmod", "fchmod", "fchmodat", "open", "openat", "creat", "mknod", "mknodat"
            ]
        );
        for rule in &filter.syscalls {
            assert_eq!(rule.action, "SCMP_ACT_ERRNO");
            let masks: Vec<u64> = rule.args.iter().map(|a| a.value).collect();
            assert_eq!(masks, [0o4000, 0o2000], "{rule:?}");
            assert!(rule.args.iter().all(|a| a.value == a.value_two));
        }
        let json = serde_json::to_value(&filter).unwrap();
        assert_eq!(json["defaultAction"], "SCMP_ACT_ALLOW");
        assert_eq!(json["syscalls"][4]["args"][0]["index"], 3);
        assert_eq!(json["syscalls"][4]["args"][0]["valueTwo"], 0o4000);
    }
}
