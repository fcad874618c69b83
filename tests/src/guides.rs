//! The guides (`README.md`, `docs/*.md`, the examples' READMEs) as the tests read them: every fenced code block and
//! the marker on the line before it, and the means to run them as written — scratch projects
//! made of a guide's files, and shell blocks whose expected output is checked.
//!
//! | marker before the block | the block is | checked by |
//! |---|---|---|
//! | `<!-- file: PATH -->` | the file PATH of the guide's project | the guide's test builds and runs the project |
//! | `<!-- run: TEST -->` | shell commands, run in order in the project | TEST (a file of the repository that names the guide) |
//! | `<!-- excerpt: PATH -->` | a verbatim excerpt of the repository's file PATH | `guides.rs` |
//! | `<!-- parse: manifest -->`, `<!-- parse: grants -->` | a catalog manifest, a grants file | `guides.rs`, with the library's parsers |
//! | `<!-- not-run: WHY -->` | commands no test can run here (installing packages) | nothing: WHY says why |
//! | none | output, a diagram or a format (`text` blocks only) | |
//!
//! In a run block, a command followed by `# prints TEXT` must print exactly TEXT on stdout, and
//! one followed by `# fails: TEXT` must fail with TEXT in its stdout or stderr.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::peers::repo_root;

/// What a code block of a guide is, by its marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// `<!-- file: PATH -->`: a file of the guide's project.
    File(String),
    /// `<!-- run: TEST -->`: commands the named test runs.
    Run(String),
    /// `<!-- excerpt: PATH -->`: a verbatim part of the repository's file PATH.
    Excerpt(String),
    /// `<!-- parse: WHAT -->`: a file the library parses (`manifest`, `grants`).
    Parse(String),
    /// `<!-- not-run: WHY -->`: commands no test runs, and why.
    NotRun(String),
    /// No marker: output (only `text` blocks may be unmarked).
    Unmarked,
}

/// One fenced code block of a guide.
#[derive(Debug, Clone)]
pub struct Block {
    /// The guide, relative to the repository root (`docs/host-rust.md`).
    pub guide: String,
    /// The line of its opening fence, from 1.
    pub line: usize,
    /// The fence's language (`rust`, `sh`, `text`, …).
    pub lang: String,
    /// What it is.
    pub kind: Kind,
    /// Its text, each line ending in a newline.
    pub text: String,
}

impl Block {
    /// `docs/host-rust.md:42`, for messages.
    #[must_use]
    pub fn location(&self) -> String {
        format!("{}:{}", self.guide, self.line)
    }
}

/// The guides: `README.md`, every `docs/*.md`, and the examples' READMEs
/// (`examples/README.md`, `examples/*/README.md`).
///
/// # Panics
/// When `docs/` or `examples/` cannot be read.
#[must_use]
pub fn all() -> Vec<String> {
    let root = repo_root();
    let entries = |dir: &str| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let mut guides = vec!["README.md".to_owned()];
    guides.extend(
        entries("docs")
            .into_iter()
            .filter(|name| name.ends_with(".md"))
            .map(|name| format!("docs/{name}")),
    );
    guides.extend(
        std::iter::once("README.md".to_owned())
            .chain(
                entries("examples")
                    .into_iter()
                    .map(|d| format!("{d}/README.md")),
            )
            .map(|readme| format!("examples/{readme}"))
            .filter(|readme| root.join(readme).is_file()),
    );
    guides
}

/// The code blocks of `guide` (relative to the repository root).
///
/// # Panics
/// When the guide cannot be read, a fence is not closed, or a marker has no block after it.
#[must_use]
pub fn blocks(guide: &str) -> Vec<Block> {
    let text =
        std::fs::read_to_string(repo_root().join(guide)).unwrap_or_else(|e| panic!("{guide}: {e}"));
    parse(guide, &text)
}

/// The code blocks of `text`, the guide `guide`.
///
/// # Panics
/// When a fence is not closed or a marker has no block after it.
#[must_use]
pub fn parse(guide: &str, text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if marker(line).is_some() {
            let next = lines.get(i + 1).copied().unwrap_or_default();
            assert!(
                next.starts_with("```"),
                "{guide}:{}: the marker `{line}` is not followed by a code block",
                i + 1
            );
        }
        let Some(lang) = line.strip_prefix("```") else {
            i += 1;
            continue;
        };
        let kind = i
            .checked_sub(1)
            .and_then(|before| marker(lines[before]))
            .unwrap_or(Kind::Unmarked);
        let end = (i + 1..lines.len())
            .find(|&j| lines[j] == "```")
            .unwrap_or_else(|| panic!("{guide}:{}: the code block is not closed", i + 1));
        let mut body = String::new();
        for body_line in &lines[i + 1..end] {
            body.push_str(body_line);
            body.push('\n');
        }
        blocks.push(Block {
            guide: guide.to_owned(),
            line: i + 1,
            lang: lang.trim().to_owned(),
            kind,
            text: body,
        });
        i = end + 1;
    }
    blocks
}

/// The marker a line is, if it is one.
fn marker(line: &str) -> Option<Kind> {
    let inner = line.strip_prefix("<!-- ")?.strip_suffix(" -->")?;
    let (key, value) = inner.split_once(": ").unwrap_or((inner, ""));
    let value = value.to_owned();
    Some(match key {
        "file" => Kind::File(value),
        "run" => Kind::Run(value),
        "excerpt" => Kind::Excerpt(value),
        "parse" => Kind::Parse(value),
        "not-run" => Kind::NotRun(value),
        _ => return None,
    })
}

/// The targets of a guide's Markdown links (`[text](target)`) outside code blocks, with their
/// line numbers.
#[must_use]
pub fn links(text: &str) -> Vec<(usize, String)> {
    let mut links = Vec::new();
    let mut in_code = false;
    for (n, line) in text.lines().enumerate() {
        if line.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else {
                break;
            };
            links.push((n + 1, rest[..end].to_owned()));
            rest = &rest[end..];
        }
    }
    links
}

/// The anchors of a Markdown file's headings, as GitHub makes them: lower case, letters,
/// digits, `-` and `_` kept, spaces made `-`, everything else dropped.
#[must_use]
pub fn anchors(text: &str) -> Vec<String> {
    let mut in_code = false;
    let mut anchors = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        let heading = line.trim_start_matches('#');
        if in_code || heading.len() == line.len() || !heading.starts_with(' ') {
            continue;
        }
        let anchor: String = heading
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        anchors.push(anchor);
    }
    anchors
}

/// The files of a guide's blocks under `dir/` (`""`: all), as (path below `dir`, content).
#[must_use]
pub fn files<'a>(blocks: &'a [Block], dir: &str) -> Vec<(&'a str, &'a str)> {
    blocks
        .iter()
        .filter_map(|b| match &b.kind {
            Kind::File(path) => path
                .strip_prefix(dir)
                .map(|p| (p.trim_start_matches('/'), b.text.as_str())),
            _ => None,
        })
        .collect()
}

/// The blocks `test` runs (`<!-- run: TEST -->`), in order.
#[must_use]
pub fn runs<'a>(blocks: &'a [Block], test: &str) -> Vec<&'a Block> {
    blocks
        .iter()
        .filter(|b| b.kind == Kind::Run(test.to_owned()))
        .collect()
}

/// Writes `files` (paths relative to `dir`) into `dir`.
///
/// # Panics
/// When a file cannot be written.
pub fn write(dir: &Path, files: &[(&str, &str)]) {
    for (path, content) in files {
        let target = dir.join(path);
        std::fs::create_dir_all(target.parent().expect("a file has a parent directory"))
            .unwrap_or_else(|e| panic!("{}: {e}", target.display()));
        std::fs::write(&target, content).unwrap_or_else(|e| panic!("{}: {e}", target.display()));
    }
}

/// `target/guides/`: where the guides' projects are built (a target directory of their own:
/// with the workspace's, the different feature sets of their dependencies would rebuild them
/// under new hashes anyway).
#[must_use]
pub fn target_dir() -> PathBuf {
    repo_root().join("target/guides")
}

/// A fresh, empty scratch directory below [`target_dir`] (on the same file system as the
/// checkout, so that files can be hard-linked from it).
///
/// # Panics
/// When it cannot be made.
#[must_use]
pub fn scratch(name: &str) -> tempfile::TempDir {
    let parent = target_dir();
    std::fs::create_dir_all(&parent).unwrap_or_else(|e| panic!("{}: {e}", parent.display()));
    tempfile::Builder::new()
        .prefix(&format!("{name}-"))
        .tempdir_in(&parent)
        .unwrap_or_else(|e| panic!("{}: {e}", parent.display()))
}

/// Runs a guide's shell block with bash (`-euo pipefail`), checking its `# prints` and
/// `# fails:` comments.
#[derive(Debug, Clone)]
pub struct Shell {
    dir: PathBuf,
    path: Vec<PathBuf>,
    env: Vec<(String, OsString)>,
    cargo_builds_done: bool,
}

impl Shell {
    /// A shell in `dir`, with the environment of a user's terminal: the test's, without the
    /// variables cargo sets for this checkout (`TETHER_CATALOG`) or for its target directory.
    #[must_use]
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            path: Vec::new(),
            env: Vec::new(),
            cargo_builds_done: false,
        }
    }

    /// Puts `dir` on `PATH`, before the directories added earlier and the inherited ones.
    #[must_use]
    pub fn path(mut self, dir: impl Into<PathBuf>) -> Self {
        self.path.push(dir.into());
        self
    }

    /// Sets a variable.
    #[must_use]
    pub fn env(mut self, name: &str, value: impl Into<OsString>) -> Self {
        self.env.push((name.to_owned(), value.into()));
        self
    }

    /// `cargo build` lines do nothing: the test run has built the workspace already.
    #[must_use]
    pub fn cargo_builds_done(mut self) -> Self {
        self.cargo_builds_done = true;
        self
    }

    /// Runs `block`.
    ///
    /// # Panics
    /// When bash cannot start or the block fails (the message quotes its output).
    pub fn run(&self, block: &Block) -> Output {
        let mut script = String::from("set -euo pipefail\n");
        if self.cargo_builds_done {
            script.push_str(
                "cargo() { if [ \"$1\" = build ]; then echo \"(cargo $*: built by the test run)\" >&2; \
                 else command cargo \"$@\"; fi; }\n",
            );
        }
        script.push_str(&checked_script(block));
        let mut path = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .collect::<Vec<_>>();
        for dir in &self.path {
            path.insert(0, dir.clone());
        }
        let mut command = Command::new("bash");
        command
            .arg("-c")
            .arg(&script)
            .current_dir(&self.dir)
            .env(
                "PATH",
                std::env::join_paths(path).expect("PATH entries have no `:`"),
            )
            .env_remove("TETHER_CATALOG")
            .env_remove("CARGO_TARGET_DIR");
        for (name, value) in &self.env {
            command.env(name, value);
        }
        let out = command
            .output()
            .unwrap_or_else(|e| panic!("{}: cannot run bash: {e}", block.location()));
        assert!(
            out.status.success(),
            "{}: the commands failed ({}):\n{}\nstdout:\n{}\nstderr:\n{}",
            block.location(),
            out.status,
            block.text,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}

/// The block as a script whose `# prints` / `# fails:` comments are checked.
#[must_use]
pub fn checked_script(block: &Block) -> String {
    let mut script = String::new();
    let mut command = String::new();
    let mut first_line = 0;
    for (n, line) in block.text.lines().enumerate() {
        if command.is_empty() {
            first_line = block.line + 1 + n;
        }
        if let Some(continued) = line.strip_suffix('\\') {
            command.push_str(continued);
            command.push_str("\\\n");
            continue;
        }
        command.push_str(line);
        let at = format!("{}:{first_line}", block.guide);
        script.push_str(&check(&command, &at));
        script.push('\n');
        command.clear();
    }
    script
}

/// One command, with its expectation checked.
fn check(command: &str, at: &str) -> String {
    if let Some((run, expected)) = command.split_once(" # prints ") {
        let run = run.trim_end();
        let expected = quote(expected.trim_end());
        return format!(
            "__out=$({run})\n[ \"$__out\" = {expected} ] || {{ printf '%s: expected %s, got %s\\n' {at} {expected} \"$__out\" >&2; exit 1; }}",
            at = quote(at)
        );
    }
    if let Some((run, expected)) = command.split_once(" # fails: ") {
        let run = run.trim_end();
        let expected = quote(expected.trim_end());
        return format!(
            "if __out=$({run} 2>&1); then printf '%s: expected a failure, got: %s\\n' {at} \"$__out\" >&2; exit 1; fi\n\
             printf '%s\\n' \"$__out\" >&2\n\
             case \"$__out\" in *{expected}*) ;; *) printf '%s: expected %s in the failure\\n' {at} {expected} >&2; exit 1 ;; esac",
            at = quote(at)
        );
    }
    command.to_owned()
}

/// `text` in single quotes for bash.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GUIDE: &str = "text\n\n<!-- file: a/b.rs -->\n```rust\nfn main() {}\n```\n\n```text\nout\n```\n\n<!-- run: tests/tests/guides.rs -->\n```sh\necho hi   # prints hi\nfalse \\\n  x   # fails: nope\n```\n";

    #[test]
    fn blocks_carry_their_marker_line_and_text() {
        let blocks = parse("g.md", GUIDE);
        assert_eq!(blocks.len(), 3);
        assert_eq!(blocks[0].kind, Kind::File("a/b.rs".into()));
        assert_eq!(blocks[0].line, 4);
        assert_eq!(blocks[0].text, "fn main() {}\n");
        assert_eq!(blocks[1].kind, Kind::Unmarked);
        assert_eq!(blocks[1].lang, "text");
        assert_eq!(blocks[2].kind, Kind::Run("tests/tests/guides.rs".into()));
        assert_eq!(files(&blocks, "a"), [("b.rs", "fn main() {}\n")]);
    }

    #[test]
    fn prints_and_fails_comments_become_checks_and_continuations_stay_one_command() {
        let blocks = parse("g.md", GUIDE);
        let script = checked_script(&blocks[2]);
        assert!(
            script.contains("__out=$(echo hi)\n[ \"$__out\" = 'hi' ]"),
            "{script}"
        );
        assert!(
            script.contains("if __out=$(false \\\n  x 2>&1)"),
            "{script}"
        );
        assert!(script.contains("*'nope'*"), "{script}");
        assert!(script.contains("'g.md:15'"), "{script}");
    }

    #[test]
    fn links_and_heading_anchors_are_read_as_github_renders_them() {
        let text = "# Title\n\nSee [a](b.md#checking-a-plugin-tether-conformance) and [c](https://x).\n\
                    ```sh\n[no](link)\n# not a heading\n```\n\n## Checking a plugin: `tether conformance`\n";
        assert_eq!(
            links(text),
            [
                (3, "b.md#checking-a-plugin-tether-conformance".to_owned()),
                (3, "https://x".to_owned())
            ]
        );
        assert_eq!(
            anchors(text),
            ["title", "checking-a-plugin-tether-conformance"]
        );
    }

    #[test]
    #[should_panic(expected = "not followed by a code block")]
    fn a_marker_without_a_block_is_an_error() {
        let _ = parse("g.md", "<!-- file: x -->\n\ntext\n");
    }
}
