//! The documentation names only flags `tether` has (issue 25, item 5): every `--flag` written
//! after `tether SUBCOMMAND` in the repository's Markdown is one of that subcommand's (or a
//! global one), and every `--flag` of `docs/cli.md`, the command's own guide, is one of some
//! subcommand's — checked against the command line's definition itself (`clap`), so a renamed
//! or removed flag fails here until the docs follow.

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    use clap::CommandFactory as _;

    use crate::args::Cli;

    /// Directories whose Markdown is not the project's own (dependencies, build output).
    const NOT_OURS: &[&str] = &["node_modules", "target", "dist", ".git"];

    /// The workspace root (the parent of this crate's directory).
    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the cli crate is a directory of the workspace")
            .to_owned()
    }

    /// Every Markdown file of the repository, outside [`NOT_OURS`].
    fn markdown(dir: &Path, found: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() && !NOT_OURS.contains(&name.as_str()) {
                markdown(&path, found);
            } else if name.ends_with(".md") {
                found.push(path);
            }
        }
    }

    /// The long flags each subcommand accepts (its own, the global ones, `--help`), by name.
    fn accepted() -> BTreeMap<String, BTreeSet<String>> {
        let cli = Cli::command();
        let longs = |command: &clap::Command| -> BTreeSet<String> {
            command
                .get_arguments()
                .flat_map(|a| {
                    a.get_long()
                        .into_iter()
                        .chain(a.get_all_aliases().unwrap_or_default())
                })
                .map(ToOwned::to_owned)
                .chain(["help".to_owned()])
                .collect()
        };
        let global = longs(&cli);
        cli.get_subcommands()
            .map(|sub| {
                let mut flags = longs(sub);
                flags.extend(global.iter().cloned());
                (sub.get_name().to_owned(), flags)
            })
            .collect()
    }

    /// The end of the command line that starts at `text[start..]`: its code span's closing
    /// backtick, a shell comment, `&&`, `||`, `;`, a pipe (not `\|`, a table's escaped one), or
    /// the end of a line that does not end in `\`.
    fn command_end(text: &str, start: usize) -> usize {
        let bytes = text.as_bytes();
        let mut i = start;
        while i < bytes.len() {
            match bytes[i] {
                b'`' | b';' => return i,
                b'&' if bytes.get(i + 1) == Some(&b'&') => return i,
                b'#' if i > 0 && bytes[i - 1] == b' ' => return i,
                b'|' if i == 0 || bytes[i - 1] != b'\\' => return i,
                b'\n' if !text[start..i].trim_end().ends_with('\\') => return i,
                _ => {}
            }
            i += 1;
        }
        i
    }

    /// The long flags written in `span`: `--name` after a space, `[`, `(` or a backtick, without
    /// its `=VALUE`.
    fn flags_in(span: &str) -> Vec<String> {
        let bytes = span.as_bytes();
        let mut flags = Vec::new();
        for (i, _) in span.match_indices("--") {
            let before = if i == 0 { b' ' } else { bytes[i - 1] };
            if !matches!(before, b' ' | b'\n' | b'[' | b'(' | b'`') {
                continue;
            }
            let name: String = span[i + 2..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            if name.starts_with(|c: char| c.is_ascii_lowercase()) {
                flags.push(name);
            }
        }
        flags
    }

    /// The 1-based line of byte `at` in `text`.
    fn line_of(text: &str, at: usize) -> usize {
        text[..at].matches('\n').count() + 1
    }

    /// Each `tether SUBCOMMAND …` command line of `text` (also `$tether` and
    /// `target/debug/tether`): its line, the subcommand and the flags written after it.
    fn command_lines<'a>(
        text: &'a str,
        subcommands: &BTreeMap<String, BTreeSet<String>>,
    ) -> Vec<(usize, &'a str, Vec<String>)> {
        let mut found = Vec::new();
        for (at, _) in text.match_indices("tether ") {
            let before = text[..at].chars().next_back().unwrap_or(' ');
            if before.is_alphanumeric() || before == '_' || before == '-' {
                continue;
            }
            let rest = &text[at + "tether ".len()..];
            let word_len = rest
                .find(|c: char| !(c.is_ascii_lowercase() || c == '-'))
                .unwrap_or(rest.len());
            let sub = &rest[..word_len];
            if !subcommands.contains_key(sub) {
                continue; // prose: "tether hosts", "the tether command"
            }
            let start = at + "tether ".len() + word_len;
            let end = command_end(text, start);
            found.push((line_of(text, at), sub, flags_in(&text[start..end])));
        }
        found
    }

    /// `text` without its `cargo …` command lines, whose flags are cargo's.
    fn without_cargo(text: &str) -> String {
        let mut kept = String::new();
        let mut rest = 0;
        for (at, _) in text.match_indices("cargo ") {
            if at < rest {
                continue;
            }
            kept.push_str(&text[rest..at]);
            rest = command_end(text, at);
        }
        kept.push_str(&text[rest..]);
        kept
    }

    #[test]
    fn every_flag_the_docs_write_after_a_tether_subcommand_is_one_it_accepts() {
        let accepted = accepted();
        let mut files = Vec::new();
        markdown(&root(), &mut files);
        let mut problems = Vec::new();
        let mut checked = 0;
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            for (line, sub, flags) in command_lines(&text, &accepted) {
                for flag in flags {
                    checked += 1;
                    if !accepted[sub].contains(&flag) {
                        problems.push(format!(
                            "{}:{line}: `tether {sub} --{flag}`: `tether {sub}` has no --{flag}",
                            file.display()
                        ));
                    }
                }
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        assert!(
            checked > 50,
            "only {checked} flags found after tether subcommands"
        );
    }

    #[test]
    fn every_flag_of_the_cli_guide_is_one_some_subcommand_accepts() {
        let accepted = accepted();
        let any: BTreeSet<&String> = accepted.values().flatten().collect();
        let guide = root().join("docs/cli.md");
        let text = without_cargo(&std::fs::read_to_string(&guide).unwrap());
        let flags = flags_in(&text);
        let unknown: BTreeSet<&String> = flags.iter().filter(|f| !any.contains(f)).collect();
        assert!(
            unknown.is_empty(),
            "{}: flags no tether subcommand has: {unknown:?}",
            guide.display()
        );
        assert!(flags.len() > 50, "only {} flags in the guide", flags.len());
    }

    #[test]
    fn command_lines_end_at_their_code_span_comment_or_next_command() {
        let accepted = accepted();
        let text = "`tether list --catalog D` --plaintext\n\
                    $tether check --catalog D && $tether run --repeat 2   # --nope\n\
                    tether call --cmd x \\\n    --cookie K=V proto.KV/Get\n\
                    the tether hosts --nope; `tether inspect (--catalog D \\| --cmd C)`";
        let lines: Vec<(usize, &str, Vec<String>)> = command_lines(text, &accepted);
        let expect = |line, sub, flags: &[&str]| {
            (
                line,
                sub,
                flags.iter().map(|f| (*f).to_owned()).collect::<Vec<_>>(),
            )
        };
        assert_eq!(
            lines,
            [
                expect(1, "list", &["catalog"]),
                expect(2, "check", &["catalog"]),
                expect(2, "run", &["repeat"]),
                expect(3, "call", &["cmd", "cookie"]),
                expect(5, "inspect", &["catalog", "cmd"]),
            ]
        );
        assert_eq!(
            flags_in(&without_cargo(
                "`cargo run --bin tether -- list` and `--grants F`"
            )),
            ["grants"]
        );
    }
}
