//! The keeper: pid 1 of a plugin's world (`tether_broker::confine::world`).
//!
//! A static program without the standard library or libc, compiled by `broker/build.rs` and
//! embedded in the broker, which runs it from a sealed memfd — nothing is installed. It starts
//! with every signal blocked and `SIGCHLD` ignored (both set by the world's maker and kept across
//! `exec`), so the kernel reaps every orphan of the world at once, and a signal sent to it from
//! inside the world is dropped (pid 1 has no handlers).
//!
//! Descriptor 3 is one end of a `SOCK_SEQPACKET` pair whose other end only the host holds:
//! - it says `R` when it runs (the maker waits for that: the world is ready);
//! - for each request byte `4` or `6` it answers with one byte, `0` and a TCP socket of that
//!   family made in the world's network namespace (`SCM_RIGHTS`), or the errno of `socket(2)`;
//! - at end-of-file — the host closed its end or died — it exits, and the kernel kills what is
//!   left in the world.
//!
//! It makes itself non-dumpable and drops every capability first: a plugin cannot read or write
//! its memory through `/proc/1/mem`, trace it or take its descriptor.

#![no_std]
#![no_main]

use core::arch::{asm, global_asm};

/// `PR_SET_DUMPABLE`.
const PR_SET_DUMPABLE: usize = 4;
/// `_LINUX_CAPABILITY_VERSION_3`.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;
const AF_INET: usize = 2;
const AF_INET6: usize = 10;
const SOCK_STREAM: usize = 1;
const SOCK_CLOEXEC: usize = 0o2_000_000;
const SOL_SOCKET: i32 = 1;
const SCM_RIGHTS: i32 = 1;
const MSG_NOSIGNAL: usize = 0x4000;
const EINTR: isize = 4;
/// The host's end.
const CONTROL: usize = 3;

#[cfg(target_arch = "x86_64")]
mod nr {
    pub(crate) const RECVFROM: usize = 45;
    pub(crate) const SENDTO: usize = 44;
    pub(crate) const SENDMSG: usize = 46;
    pub(crate) const SOCKET: usize = 41;
    pub(crate) const CLOSE: usize = 3;
    pub(crate) const PRCTL: usize = 157;
    pub(crate) const CAPSET: usize = 126;
    pub(crate) const EXIT_GROUP: usize = 231;
}

#[cfg(target_arch = "aarch64")]
mod nr {
    pub(crate) const RECVFROM: usize = 207;
    pub(crate) const SENDTO: usize = 206;
    pub(crate) const SENDMSG: usize = 211;
    pub(crate) const SOCKET: usize = 198;
    pub(crate) const CLOSE: usize = 57;
    pub(crate) const PRCTL: usize = 167;
    pub(crate) const CAPSET: usize = 91;
    pub(crate) const EXIT_GROUP: usize = 94;
}

#[cfg(target_arch = "x86_64")]
global_asm!(
    ".globl _start",
    "_start:",
    "xor ebp, ebp",
    "and rsp, -16",
    "call {main}",
    "ud2",
    main = sym main,
);

#[cfg(target_arch = "aarch64")]
global_asm!(
    ".globl _start",
    "_start:",
    "mov x29, #0",
    "mov x30, #0",
    "mov x0, sp",
    "and x0, x0, #-16",
    "mov sp, x0",
    "bl {main}",
    "brk #0",
    main = sym main,
);

/// A system call with up to six arguments; negative errno on failure.
#[cfg(target_arch = "x86_64")]
unsafe fn syscall(n: usize, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the caller passes a valid system call and arguments; the kernel clobbers only
    // rcx and r11.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") n as isize => ret,
            in("rdi") a[0], in("rsi") a[1], in("rdx") a[2],
            in("r10") a[3], in("r8") a[4], in("r9") a[5],
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// A system call with up to six arguments; negative errno on failure.
#[cfg(target_arch = "aarch64")]
unsafe fn syscall(n: usize, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the caller passes a valid system call and arguments.
    unsafe {
        asm!(
            "svc #0",
            in("x8") n,
            inlateout("x0") a[0] as isize => ret,
            in("x1") a[1], in("x2") a[2], in("x3") a[3], in("x4") a[4], in("x5") a[5],
            options(nostack),
        );
    }
    ret
}

fn exit() -> ! {
    // SAFETY: exit_group ends the process.
    unsafe { syscall(nr::EXIT_GROUP, [0; 6]) };
    loop {}
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

#[repr(C)]
struct IoVec {
    base: *const u8,
    len: usize,
}

#[repr(C)]
struct MsgHdr {
    name: usize,
    name_len: u32,
    iov: *const IoVec,
    iov_len: usize,
    control: *const u8,
    control_len: usize,
    flags: i32,
}

/// A control message carrying one descriptor: `cmsghdr` + the descriptor, padded.
#[repr(C, align(8))]
struct OneFd {
    len: usize,
    level: i32,
    kind: i32,
    fd: i32,
    pad: i32,
}

fn send_byte(byte: u8) -> isize {
    let buf = [byte];
    // SAFETY: one byte from valid memory on the control socket.
    unsafe {
        syscall(
            nr::SENDTO,
            [CONTROL, buf.as_ptr() as usize, 1, MSG_NOSIGNAL, 0, 0],
        )
    }
}

fn send_fd(fd: usize) -> isize {
    let buf = [0_u8];
    let iov = IoVec {
        base: buf.as_ptr(),
        len: 1,
    };
    let control = OneFd {
        // CMSG_LEN(sizeof(int)): the 16-byte header and the descriptor.
        len: 20,
        level: SOL_SOCKET,
        kind: SCM_RIGHTS,
        fd: fd as i32,
        pad: 0,
    };
    let msg = MsgHdr {
        name: 0,
        name_len: 0,
        iov: &iov,
        iov_len: 1,
        control: (&raw const control).cast(),
        control_len: core::mem::size_of::<OneFd>(),
        flags: 0,
    };
    // SAFETY: every pointer in `msg` points at a live local above.
    unsafe {
        syscall(
            nr::SENDMSG,
            [CONTROL, (&raw const msg) as usize, MSG_NOSIGNAL, 0, 0, 0],
        )
    }
}

extern "C" fn main() -> ! {
    // SAFETY (whole block): plain system calls on local memory.
    unsafe {
        syscall(nr::PRCTL, [PR_SET_DUMPABLE, 0, 0, 0, 0, 0]);
        let header = CapHeader {
            version: CAPABILITY_VERSION_3,
            pid: 0,
        };
        let none = [
            CapData {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            },
            CapData {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            },
        ];
        if syscall(
            nr::CAPSET,
            [(&raw const header) as usize, none.as_ptr() as usize, 0, 0, 0, 0],
        ) < 0
        {
            exit();
        }
    }
    if send_byte(b'R') < 0 {
        exit();
    }
    loop {
        let mut request = [0_u8; 1];
        // SAFETY: a one-byte buffer on the stack.
        let n = unsafe {
            syscall(
                nr::RECVFROM,
                [CONTROL, request.as_mut_ptr() as usize, 1, 0, 0, 0],
            )
        };
        if n == -EINTR {
            continue;
        }
        if n <= 0 {
            exit();
        }
        let family = match request[0] {
            b'4' => AF_INET,
            b'6' => AF_INET6,
            _ => {
                // EINVAL.
                send_byte(22);
                continue;
            }
        };
        // SAFETY: socket(2) with constant arguments.
        let fd = unsafe { syscall(nr::SOCKET, [family, SOCK_STREAM | SOCK_CLOEXEC, 0, 0, 0, 0]) };
        if fd < 0 {
            send_byte((-fd) as u8);
            continue;
        }
        send_fd(fd as usize);
        // SAFETY: the descriptor just made.
        unsafe { syscall(nr::CLOSE, [fd as usize, 0, 0, 0, 0, 0]) };
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    exit()
}
