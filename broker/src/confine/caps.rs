//! The host's own capabilities, which decide what it can do for a plugin (load a filter
//! without `no_new_privs`, make a network namespace), and files made for a plugin's world with
//! its ids ([`as_file_owner`]).

use std::io;

/// `CAP_SYS_ADMIN` (`linux/capability.h`).
pub(crate) const CAP_SYS_ADMIN: u32 = 21;

/// `CAP_DAC_READ_SEARCH` (`linux/capability.h`): read any file and search any directory,
/// whatever its mode; nothing else (no write, no change of owner or mode).
pub(crate) const CAP_DAC_READ_SEARCH: u32 = 2;

#[repr(C)]
struct Header {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Data {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`: two `Data`, for capabilities 0–31 and 32–63.
const VERSION_3: u32 = 0x2008_0522;

/// The calling thread's capability sets.
fn capget() -> io::Result<[Data; 2]> {
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget fills in `data` (two elements for version 3) for the calling thread.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_capget,
            std::ptr::from_mut(&mut header),
            data.as_mut_ptr(),
        )
    };
    if ret == 0 {
        Ok(data)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets the calling thread's capability sets to `data`. A raw system call on stack values:
/// async-signal-safe.
fn capset(data: &[Data; 2]) -> io::Result<()> {
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    // SAFETY: capset reads `header` and the two `data` elements (version 3).
    let ret = unsafe {
        libc::syscall(
            libc::SYS_capset,
            std::ptr::from_mut(&mut header),
            data.as_ptr(),
        )
    };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether the calling process has capability `cap` in its effective set.
pub(crate) fn has_capability(cap: u32) -> bool {
    let (word, bit) = ((cap / 32) as usize, cap % 32);
    capget().is_ok_and(|data| {
        data.get(word)
            .is_some_and(|d| d.effective & (1 << bit) != 0)
    })
}

/// In a launch child that switched from uid 0 to another user with `PR_SET_KEEPCAPS`: makes
/// [`CAP_DAC_READ_SEARCH`] its only permitted, effective and inheritable capability, and
/// ambient, so that the program it executes keeps it (and nothing else). Raw system calls on
/// stack values only: async-signal-safe.
pub(crate) fn keep_only_read_search() -> io::Result<()> {
    let bit = 1 << CAP_DAC_READ_SEARCH;
    let data = [
        Data {
            effective: bit,
            permitted: bit,
            inheritable: bit,
        },
        Data::default(),
    ];
    capset(&data)?;
    // SAFETY: prctl with plain integer arguments.
    let ret = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_RAISE,
            libc::c_ulong::from(CAP_DAC_READ_SEARCH),
            0,
            0,
        )
    };
    if ret != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Runs `make` on a thread of its own whose file-system ids are `(uid, gid)`, with its
/// capabilities kept: files and directories it makes are owned by those ids. For a root host
/// writing into a world's tmpfs, whose user namespace does not map the host's uid 0 (a file
/// owned by an unmapped id cannot be made there: `EOVERFLOW`). Only the new thread changes.
pub(crate) fn as_file_owner<T: Send>(
    (uid, gid): (u32, u32),
    make: impl FnOnce() -> io::Result<T> + Send,
) -> io::Result<T> {
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                // The raw calls change only this thread (glibc's wrappers would too: neither
                // is broadcast to the other threads).
                // SAFETY: setfsgid/setfsuid take plain ids and change this thread only.
                unsafe {
                    libc::syscall(libc::SYS_setfsgid, gid);
                    libc::syscall(libc::SYS_setfsuid, uid);
                }
                // They report no error: ask (-1 changes nothing and returns the current one).
                // SAFETY: as above.
                let (fsuid, fsgid) = unsafe {
                    (
                        libc::syscall(libc::SYS_setfsuid, u32::MAX),
                        libc::syscall(libc::SYS_setfsgid, u32::MAX),
                    )
                };
                if fsuid != i64::from(uid) || fsgid != i64::from(gid) {
                    return Err(io::Error::from_raw_os_error(libc::EPERM));
                }
                // Leaving fsuid 0 cleared the file-system capabilities from the effective set:
                // raise them again from the permitted set.
                let mut data = capget()?;
                for d in &mut data {
                    d.effective = d.permitted;
                }
                capset(&data)?;
                make()
            })
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}
