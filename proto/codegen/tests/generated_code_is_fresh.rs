//! Fails when a checked-in generated file no longer matches its `.proto` source.

use std::fs;

#[test]
fn checked_in_generated_code_matches_the_proto_files() {
    let root = tether_codegen::workspace_root();
    let mut stale = Vec::new();
    for job in tether_codegen::JOBS {
        let fresh = tether_codegen::generate(&root, job).expect("proto files compile");
        let code = fs::read_to_string(root.join(job.output)).unwrap_or_default();
        if fresh.code != code {
            stale.push(job.output);
        }
        let descriptor = fs::read(root.join(job.descriptor)).unwrap_or_default();
        if fresh.descriptor != descriptor {
            stale.push(job.descriptor);
        }
    }
    assert!(
        stale.is_empty(),
        "stale generated code in {stale:?}: run `cargo run -p tether-codegen` and commit the result"
    );
}
