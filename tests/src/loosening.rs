//! Attempts by a confined plugin to leave a privilege behind on the host through a directory it
//! may write (issue 22): a set-uid or set-gid file, a device node, a file given to another
//! owner, a file capability. The probe plugins make them from inside their confinement
//! ([`attempt`]); the test then inspects what landed on the host ([`left_on_the_host`]).
//!
//! A set-uid file a root host's sandbox makes in its working directory is host root's: a local
//! user who can reach it would run it as root after the plugin is gone.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::Path;

use crate::escape::errno_name;

/// The bytes of the files [`attempt`] makes: an ELF magic, as a copied binary would start.
const CONTENT: &[u8] = b"\x7fELF tether loosening probe";

/// The extended attribute that gives an executable file capabilities on the host.
pub const CAPABILITY_XATTR: &str = "security.capability";

/// A `vfs_cap_data` (revision 2) granting every capability, permitted and effective.
const ALL_CAPABILITIES: [u8; 20] = [
    0x01, 0x00, 0x00, 0x02, // VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE
    0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, // permitted, inheritable (low)
    0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, // permitted, inheritable (high)
];

fn c_path(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).unwrap_or_default()
}

fn outcome(r: libc::c_int) -> String {
    if r >= 0 {
        "ok".to_owned()
    } else {
        errno_name(io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

/// Every attempt in `dir`, `NAME=OUTCOME` separated by spaces (`ok` or the errno's name):
/// `chmod-suid` (`chmod` 04755), `chmod-sgid` (02755), `fchmod-suid`, `create-suid` (`open`
/// with `O_CREAT` and mode 04755), `mknod-char` (`/dev/null`'s numbers), `chown-root` (to
/// `0:0`), `chown-other` (to `1:1`), `setcap` (every capability as `security.capability`).
#[must_use]
pub fn attempt(dir: &Path) -> String {
    let mut out = Vec::new();
    let file = |name: &str| {
        let path = dir.join(name);
        match std::fs::write(&path, CONTENT) {
            Ok(()) => c_path(&path),
            Err(_) => CString::default(),
        }
    };
    // SAFETY (whole block): system calls on NUL-terminated paths and pointers to locals; the
    // one descriptor opened is closed here.
    unsafe {
        let suid = file("chmod-suid");
        out.push(("chmod-suid", outcome(libc::chmod(suid.as_ptr(), 0o4755))));
        let sgid = file("chmod-sgid");
        out.push(("chmod-sgid", outcome(libc::chmod(sgid.as_ptr(), 0o2755))));
        let by_fd = file("fchmod-suid");
        let fd = libc::open(by_fd.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        out.push(("fchmod-suid", outcome(libc::fchmod(fd, 0o4755))));
        libc::close(fd);
        let created = c_path(&dir.join("create-suid"));
        let fd = libc::open(
            created.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
            0o4755 as libc::c_uint,
        );
        out.push(("create-suid", outcome(fd)));
        if fd >= 0 {
            libc::close(fd);
        }
        let node = c_path(&dir.join("mknod-char"));
        out.push((
            "mknod-char",
            outcome(libc::mknod(
                node.as_ptr(),
                libc::S_IFCHR | 0o666,
                libc::makedev(1, 3),
            )),
        ));
        let owned = file("chown");
        out.push(("chown-root", outcome(libc::chown(owned.as_ptr(), 0, 0))));
        out.push(("chown-other", outcome(libc::chown(owned.as_ptr(), 1, 1))));
        let capable = file("setcap");
        let name = CString::new(CAPABILITY_XATTR).unwrap_or_default();
        out.push((
            "setcap",
            outcome(libc::setxattr(
                capable.as_ptr(),
                name.as_ptr(),
                ALL_CAPABILITIES.as_ptr().cast(),
                ALL_CAPABILITIES.len(),
                0,
            )),
        ));
    }
    out.iter()
        .map(|(name, result)| format!("{name}={result}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// What the host holds in `dir` (recursively) that loosens it: each entry with a set-uid or
/// set-gid bit, a device node, an owner other than `owner`, or a `security.capability`
/// attribute, as `NAME: what` lines. Empty when nothing was left.
#[must_use]
pub fn left_on_the_host(dir: &Path, owner: (u32, u32)) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return vec![format!("{}: cannot be listed", dir.display())];
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let name = path.display();
        if meta.mode() & 0o6000 != 0 {
            found.push(format!("{name}: mode {:o}", meta.mode()));
        }
        let kind = meta.file_type();
        if kind.is_char_device() || kind.is_block_device() {
            found.push(format!("{name}: device node"));
        }
        if (meta.uid(), meta.gid()) != owner {
            found.push(format!("{name}: owned by {}:{}", meta.uid(), meta.gid()));
        }
        let c = c_path(&path);
        let attr = CString::new(CAPABILITY_XATTR).unwrap_or_default();
        // SAFETY: a size query (no buffer) on a NUL-terminated path and name.
        let size = unsafe { libc::lgetxattr(c.as_ptr(), attr.as_ptr(), std::ptr::null_mut(), 0) };
        if size >= 0 {
            found.push(format!("{name}: {CAPABILITY_XATTR} set"));
        }
        if kind.is_dir() {
            found.extend(left_on_the_host(&path, owner));
        }
    }
    found.sort();
    found
}
