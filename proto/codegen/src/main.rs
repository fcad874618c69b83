//! `cargo run -p tether-codegen`: rewrites every checked-in generated file.

use std::fs;
use std::process::ExitCode;

fn main() -> ExitCode {
    let root = tether_codegen::workspace_root();
    for job in tether_codegen::JOBS {
        let code = match tether_codegen::generate(&root, job) {
            Ok(code) => code,
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
        if let Err(e) = fs::write(&out, code) {
            eprintln!("tether-codegen: {}: {e}", out.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", job.output);
    }
    ExitCode::SUCCESS
}
