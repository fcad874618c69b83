//! A counter plugin (go-plugin's examples/bidirectional contract) that makes output, for the
//! stdio and log tests:
//!
//! - `Put` (any key) writes `hello from stdout` with `println!`, `raw stderr warning` with
//!   `eprintln!` as `[WARN] …`, `child says hi` from a child process (`sh -c echo`), `C says
//!   hi` through C's stdio (`puts` + `fflush`), and logs `tracing::warn!(answer = 42, "a
//!   warning from tracing")`;
//! - `Put` of key `burst` instead prints `BURST_BYTES` of stdout lines (more than the SDK's
//!   GRPCStdio queue holds) and then `the last line`, and answers at once;
//! - `Put` of key `partial` prints `the last words` without a newline (it stays in Rust's
//!   stdout buffer until the SDK flushes it at shutdown) and answers at once;
//! - `Get` of key `flood` writes 100 MB (`FLOOD_BYTES`) to stderr without a newline, then
//!   answers 0; other keys answer their length.
//!
//! `STDIO_PLUGIN_CAPTURE=0` turns GRPCStdio capture off (output then uses the pipes).

use std::io::Write as _;
use std::process::ExitCode;

use tether_examples::counter::counter_server::{Counter, CounterServer};
use tether_examples::counter::{Empty, GetRequest, GetResponse, PutRequest};
use tonic::{Request, Response, Status};

/// How much a burst prints before its last line.
const BURST_BYTES: usize = 4 * 1024 * 1024;

/// How much the flood writes.
const FLOOD_BYTES: usize = 100 * 1024 * 1024;

fn main() -> ExitCode {
    let capture = std::env::var("STDIO_PLUGIN_CAPTURE").map_or(true, |v| v != "0");
    let config = tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello")
        .app_version(1)
        .capture_stdio(capture);
    tether_sdk::Plugin::new(config)
        .add_service(CounterServer::new(Chatty))
        .run()
}

struct Chatty;

#[tonic::async_trait]
impl Counter for Chatty {
    async fn get(&self, request: Request<GetRequest>) -> Result<Response<GetResponse>, Status> {
        let key = request.into_inner().key;
        if key == "flood" {
            tokio::task::spawn_blocking(|| {
                let chunk = vec![b'x'; 1024 * 1024];
                let mut stderr = std::io::stderr().lock();
                for _ in 0..FLOOD_BYTES / chunk.len() {
                    stderr.write_all(&chunk).expect("stderr is open");
                }
                stderr.flush().expect("stderr is open");
            })
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
            return Ok(Response::new(GetResponse { value: 0 }));
        }
        let value = i64::try_from(key.len()).map_err(|_| Status::out_of_range("key too long"))?;
        Ok(Response::new(GetResponse { value }))
    }

    async fn put(&self, request: Request<PutRequest>) -> Result<Response<Empty>, Status> {
        let key = request.into_inner().key;
        if key == "partial" {
            print!("the last words");
            return Ok(Response::new(Empty {}));
        }
        if key == "burst" {
            tokio::task::spawn_blocking(|| {
                let line = format!("{}\n", "y".repeat(99));
                let mut stdout = std::io::stdout().lock();
                for _ in 0..BURST_BYTES / line.len() {
                    stdout.write_all(line.as_bytes()).expect("stdout is open");
                }
                writeln!(stdout, "the last line").expect("stdout is open");
                stdout.flush().expect("stdout is open");
            })
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
            return Ok(Response::new(Empty {}));
        }
        println!("hello from stdout");
        eprintln!("[WARN] raw stderr warning");
        let child = std::process::Command::new("sh")
            .args(["-c", "echo child says hi"])
            .status()
            .map_err(|e| Status::internal(format!("sh: {e}")))?;
        if !child.success() {
            return Err(Status::internal(format!("sh: {child}")));
        }
        // SAFETY: a NUL-terminated static string; `fflush(NULL)` flushes every C stream.
        unsafe {
            libc::puts(c"C says hi".as_ptr());
            libc::fflush(std::ptr::null_mut());
        }
        tracing::warn!(answer = 42, "a warning from tracing");
        Ok(Response::new(Empty {}))
    }
}
