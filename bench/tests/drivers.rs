//! The benchmark programs print the one-line format the harness parses. (The full harness
//! runs against tether, go-plugin and the floor in `tether-tests`' `bench_harness`; this also
//! makes `cargo test` build the drivers it launches.)

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::process::Command;

use tether_bench::line::Line;

#[test]
fn pingpong_prints_a_samples_line_the_harness_parses() {
    let out = Command::new(env!("CARGO_BIN_EXE_pingpong"))
        .args(["unary", "--calls", "3", "--warmup", "1"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = Line::parse(&String::from_utf8_lossy(&out.stdout)).unwrap();
    assert_eq!(line.numbers("samples_ns").unwrap().len(), 3);
}

#[test]
fn the_drivers_without_their_plugin_variable_are_usage_errors() {
    for (program, var) in [
        (env!("CARGO_BIN_EXE_kv-bench"), "KV_PLUGIN"),
        (env!("CARGO_BIN_EXE_counter-bench"), "COUNTER_PLUGIN"),
    ] {
        let out = Command::new(program)
            .args(["measure", "--help"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{program} measure --help");
        let out = Command::new(program)
            .args(["summary", "--calls", "1"])
            .args(if var == "KV_PLUGIN" {
                &["--launches", "1"][..]
            } else {
                &[]
            })
            .env_remove(var)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{program}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("{var} is not set")), "{err}");
    }
}
