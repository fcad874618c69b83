//! The host's own capabilities, which decide what it can do for a plugin (load a filter
//! without `no_new_privs`, make a network namespace).

/// `CAP_SYS_ADMIN` (`linux/capability.h`).
pub(crate) const CAP_SYS_ADMIN: u32 = 21;

/// Whether the calling process has capability `cap` in its effective set.
pub(crate) fn has_capability(cap: u32) -> bool {
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
    // _LINUX_CAPABILITY_VERSION_3: two `Data`, for capabilities 0–31 and 32–63.
    let mut header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget fills in `data` (two elements for version 3) for the calling process.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_capget,
            std::ptr::from_mut(&mut header),
            data.as_mut_ptr(),
        )
    };
    let (word, bit) = ((cap / 32) as usize, cap % 32);
    ret == 0
        && data
            .get(word)
            .is_some_and(|d| d.effective & (1 << bit) != 0)
}
