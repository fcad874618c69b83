//! Runs a command on a host that cannot make user namespaces, as under a container runtime
//! whose seccomp profile forbids them (Docker's default does): installs a system-call filter
//! that refuses `clone` and `unshare` with `CLONE_NEWUSER` (`EPERM`) and `clone3` (`ENOSYS`,
//! whose flags a filter cannot read, so that callers fall back to `clone`), then executes the
//! command, which inherits the filter. The namespaces-policy tests run `tether` under it: the
//! host really cannot make a plugin's world.
//!
//! ```text
//! no-userns PROGRAM ARGS…
//! ```
//!
//! Exit status: the command's; 2 for a usage error, 3 when the filter cannot be installed or
//! the command cannot be executed (the reason on stderr).

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt as _;
use std::process::ExitCode;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

/// The two filters: `CLONE_NEWUSER` refused with `EPERM`, `clone3` with `ENOSYS`.
fn filters() -> Result<[BpfProgram; 2], seccompiler::BackendError> {
    let arch = std::env::consts::ARCH.try_into()?;
    let newuser = libc::CLONE_NEWUSER as u64;
    let new_user_namespace = || {
        SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(newuser),
            newuser,
        )
        .and_then(|c| SeccompRule::new(vec![c]))
    };
    let refuse_newuser = SeccompFilter::new(
        BTreeMap::from([
            (libc::SYS_clone, vec![new_user_namespace()?]),
            (libc::SYS_unshare, vec![new_user_namespace()?]),
        ]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;
    let no_clone3 = SeccompFilter::new(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )?;
    Ok([refuse_newuser.try_into()?, no_clone3.try_into()?])
}

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let Some((program, rest)) = args.split_first() else {
        eprintln!("usage: no-userns PROGRAM ARGS…");
        return ExitCode::from(2);
    };
    let programs = match filters() {
        Ok(programs) => programs,
        Err(e) => {
            eprintln!("no-userns: cannot build the filter: {e}");
            return ExitCode::from(3);
        }
    };
    for program in &programs {
        // Sets no_new_privs first, as an unprivileged process must.
        if let Err(e) = seccompiler::apply_filter(program) {
            eprintln!("no-userns: cannot install the filter: {e}");
            return ExitCode::from(3);
        }
    }
    let e = std::process::Command::new(program).args(rest).exec();
    eprintln!(
        "no-userns: cannot execute {}: {e}",
        program.to_string_lossy()
    );
    ExitCode::from(3)
}
