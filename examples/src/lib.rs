//! Shared code of the example hosts and plugins: the generated protocol types, how the example
//! hosts launch their plugin ([`LaunchFlags`], also used by the benchmark's drivers), the KV
//! plugin's message limits, and the agent demo's steps ([`agent`], served by `agent-demo`).

/// go-plugin's `examples/grpc` KV protocol (`proto/kv.proto`, `package proto`), compiled by
/// `build.rs` with `tether-build`.
#[allow(missing_docs, unreachable_pub, clippy::all, clippy::pedantic)]
pub mod kv {
    include!(concat!(env!("OUT_DIR"), "/kv/proto.rs"));

    /// The encoded `FileDescriptorSet` of `kv.proto`, for gRPC server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/kv/tether_descriptors.bin"));
}

/// go-plugin's `examples/bidirectional` counter protocol (`proto/counter.proto`, `package
/// proto`): `Counter` served by the plugin, `AddHelper` served by the host on a broker id.
/// Compiled by `build.rs` with `tether-build`.
#[allow(missing_docs, unreachable_pub, clippy::all, clippy::pedantic)]
pub mod counter {
    include!(concat!(env!("OUT_DIR"), "/counter/proto.rs"));

    /// The encoded `FileDescriptorSet` of `counter.proto`, for gRPC server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/counter/tether_descriptors.bin"));
}

/// The `streams` example protocol (`proto/streams.proto`): every kind of streaming RPC.
/// Compiled by `build.rs` with `tether-build`.
#[allow(missing_docs, unreachable_pub, clippy::all, clippy::pedantic)]
pub mod streams_proto {
    include!(concat!(env!("OUT_DIR"), "/streams/streams.rs"));

    /// The encoded `FileDescriptorSet` of `streams.proto`, for gRPC server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/streams/tether_descriptors.bin"));
}

pub mod adder;
pub mod agent;
pub mod counter_service;
pub mod launch_flags;
pub mod streams;

pub use launch_flags::LaunchFlags;

/// The file a KV or counter example plugin keeps `key` in: `kv_<key>` in its working
/// directory, as go-plugin's examples do.
///
/// # Errors
/// `InvalidArgument` for a key that could name another file: empty, `.`, `..`, or containing
/// `/`, `\` or NUL.
pub fn key_path(key: &str) -> Result<std::path::PathBuf, tonic::Status> {
    if key.is_empty() || key == "." || key == ".." || key.contains(['/', '\\', '\0']) {
        return Err(tonic::Status::invalid_argument(format!(
            "invalid key {key:?}: keys must be non-empty, not `.` or `..`, and contain no `/`, `\\` or NUL"
        )));
    }
    Ok(std::path::PathBuf::from(format!("kv_{key}")))
}

/// `$var` (e.g. `KV_PLUGIN`), split like a shell would into program and arguments: how the
/// example hosts learn which plugin to launch.
///
/// # Errors
/// The sentence to print when the variable is unset, empty, not UTF-8 or not splittable.
pub fn plugin_command(var: &str) -> Result<(String, Vec<String>), String> {
    let command = std::env::var_os(var)
        .ok_or_else(|| format!("{var} is not set; set it to the plugin's command line"))?
        .into_string()
        .map_err(|_| format!("{var} is not valid UTF-8"))?;
    let mut words = shell_words::split(&command)
        .map_err(|e| format!("{var}={command:?} cannot be split into words: {e}"))?;
    if words.is_empty() {
        return Err(format!("{var} is empty; set it to the plugin command"));
    }
    let program = words.remove(0);
    Ok((program, words))
}

/// Log lines on stderr, filtered by `$var` (`tracing` syntax, default `warn`), coloured only
/// on a terminal.
pub fn init_logging(var: &str) {
    use std::io::IsTerminal as _;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env(var)
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

/// An error and its sources on one line, `a: b: c`, skipping a source whose text its parent
/// already contains (the example hosts' error messages).
#[must_use]
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let part = e.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = e.source();
    }
    text.replace('\n', " ")
}

/// The largest value the KV example plugin carries: 64 MiB.
///
/// tonic (like grpc-go) refuses to decode a message over 4 MiB by default; `kv-plugin` raises
/// the limit so that the benchmark (`kv-bench measure payload`, in `tether-bench`) can move
/// 64 MiB values through it. A go-plugin KV plugin keeps grpc-go's 4 MiB receive cap; the
/// `kv-host` example, whose values come from its command line, keeps tonic's.
pub const MAX_VALUE_LEN: usize = 64 * 1024 * 1024;

/// The message size limit the KV example plugin and the benchmark's KV host set on both
/// encoding and decoding (`max_encoding_message_size` / `max_decoding_message_size` of the
/// generated `KvClient` and `KvServer`): [`MAX_VALUE_LEN`] plus 64 KiB for the key and protobuf framing.
pub const MAX_MESSAGE_SIZE: usize = MAX_VALUE_LEN + 64 * 1024;

/// The heap growth at which glibc serves an allocation with its own `mmap` instead of from the
/// heap, as [`keep_large_allocations`] sets it: above the KV plugin's largest message.
pub const MMAP_THRESHOLD: i32 = 1 << 30;

/// Makes glibc keep freed memory for reuse instead of returning it to the kernel at once, so
/// that large messages (the KV plugin carries up to [`MAX_VALUE_LEN`] bytes) reuse heap pages
/// instead of faulting in and zeroing fresh ones for every buffer: allocations up to
/// [`MMAP_THRESHOLD`] come from the heap, and the heap's free top is not trimmed. The cost: a
/// process keeps (reusably) as much heap as its largest messages needed. Measured in
/// bench/BENCHMARKS.md ("glibc keeps freed memory"): 64 MiB round trips ≈ 1.6–2× faster. Returns
/// whether glibc accepted both settings; elsewhere (musl, other systems) it does nothing and
/// returns `false`.
pub fn keep_large_allocations() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes malloc's tuning parameters; it takes the allocator's own
        // lock and is safe to call at any time, here before any other thread exists.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
                && libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}
