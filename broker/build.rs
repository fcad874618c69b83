//! Builds the keeper (`keeper/main.rs`), pid 1 of every plugin's world, as a tiny static program
//! for the target, to be embedded with `include_bytes!` (`src/confine/world/keeper.rs`).
//!
//! It is compiled with the same `rustc` cargo uses, without the standard library or libc
//! (`-nostartfiles -nostdlib -static`), so only the linker rustc already needs is used. On an
//! architecture the keeper has no entry code for, or when compiling it fails, an empty file is
//! embedded instead: worlds are then unavailable on that build, and launches fall back to the
//! other confinement layers, saying why.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=keeper/main.rs");
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let keeper = out.join("keeper");
    let target = std::env::var("TARGET").unwrap_or_default();
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let supported = os == "linux" && (arch == "x86_64" || arch == "aarch64");
    let built = supported && compile(&target, &keeper);
    if !built {
        if supported {
            println!(
                "cargo:warning=building the world keeper failed: plugins will run without namespaces"
            );
        }
        std::fs::write(&keeper, b"").expect("OUT_DIR is writable");
    }
}

/// Compiles the keeper for `target` into `output`; `false` (with the compiler's output printed
/// as warnings) when that fails.
fn compile(target: &str, output: &std::path::Path) -> bool {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let mut command = Command::new(rustc);
    command
        .args([
            "--edition",
            "2024",
            "--crate-type",
            "bin",
            "--crate-name",
            "tether_keeper",
        ])
        .args(["--target", target])
        .args([
            "-C",
            "panic=abort",
            "-C",
            "opt-level=s",
            "-C",
            "debuginfo=0",
        ])
        .args(["-C", "strip=symbols", "-C", "relocation-model=static"])
        .args(["-C", "link-arg=-nostartfiles", "-C", "link-arg=-nostdlib"])
        .args(["-C", "link-arg=-static"])
        .arg("-o")
        .arg(output)
        .arg("keeper/main.rs")
        // The workspace's flags (lints, instrumentation) are for the host library, not for
        // this freestanding program.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS");
    if let Some(linker) = std::env::var_os("RUSTC_LINKER") {
        let mut flag = std::ffi::OsString::from("linker=");
        flag.push(linker);
        command.arg("-C").arg(flag);
    }
    match command.output() {
        Ok(result) if result.status.success() => true,
        Ok(result) => {
            for line in String::from_utf8_lossy(&result.stderr).lines() {
                println!("cargo:warning={line}");
            }
            false
        }
        Err(e) => {
            println!("cargo:warning=cannot run rustc for the world keeper: {e}");
            false
        }
    }
}
