//! `kv-step KEY VALUE`: one workflow step as a one-shot program — it writes VALUE to `kv_KEY`
//! in its working directory (what the KV plugin's `Put` does) and exits. `kv-bench measure
//! workflow --model containers` runs it once per step in a sandbox of its own (the model of a
//! workflow engine that starts one container per step: Argo, Tekton), against the same steps
//! as `Put`s to one long-lived plugin.
//!
//! Exit status: 0 written, 1 the file could not be written, 2 usage.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [key, value] = args.as_slice() else {
        eprintln!("usage: kv-step KEY VALUE");
        return ExitCode::from(2);
    };
    let path = match tether_examples::key_path(key) {
        Ok(path) => path,
        Err(status) => {
            eprintln!("kv-step: {}", status.message());
            return ExitCode::from(2);
        }
    };
    match std::fs::write(&path, value) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kv-step: writing {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}
