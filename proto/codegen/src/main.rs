//! `cargo run -p tether-codegen`: rewrites every checked-in generated file.

use std::fs;
use std::process::ExitCode;

fn main() -> ExitCode {
    let root = tether_codegen::workspace_root();
    for job in tether_codegen::JOBS {
        let generated = match tether_codegen::generate(&root, job) {
            Ok(generated) => generated,
            Err(e) => {
                eprintln!("tether-codegen: {e}");
                return ExitCode::FAILURE;
            }
        };
        let out = root.join(job.output);
        if let Some(dir) = out.parent()
            && let Err(e) = fs::create_dir_all(dir)
        {
            eprintln!("tether-codegen: {}: {e}", dir.display());
            return ExitCode::FAILURE;
        }
        for (path, bytes) in [
            (job.output, generated.code.as_bytes()),
            (job.descriptor, &generated.descriptor[..]),
        ] {
            if let Err(e) = fs::write(root.join(path), bytes) {
                eprintln!("tether-codegen: {path}: {e}");
                return ExitCode::FAILURE;
            }
            println!("wrote {path}");
        }
    }
    ExitCode::SUCCESS
}
