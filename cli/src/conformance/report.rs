//! The result of each check and the table `tether conformance` prints.

use std::fmt;

/// How much a check matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    /// A failure makes the plugin non-conforming (non-zero exit status).
    Required,
    /// Reported; a plugin need not do it.
    Optional,
    /// What good plugins do; a failure is a warning.
    Recommended,
}

/// What a check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It does what the section says; what was seen.
    Pass(String),
    /// It does not; what was seen and what to change.
    Fail { seen: String, remedy: String },
    /// The check cannot be made for this plugin; why.
    NotApplicable(String),
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CheckResult {
    pub(crate) name: &'static str,
    /// The section of docs/PROTOCOL.md, e.g. `§3.1`.
    pub(crate) section: &'static str,
    pub(crate) level: Level,
    pub(crate) outcome: Outcome,
}

impl CheckResult {
    pub(crate) fn new(
        name: &'static str,
        section: &'static str,
        level: Level,
        outcome: Outcome,
    ) -> Self {
        Self {
            name,
            section,
            level,
            outcome,
        }
    }

    /// `pass`, `FAIL`, `warn`, `n/a` (optional checks that fail are `no`).
    fn verdict(&self) -> &'static str {
        match (&self.outcome, self.level) {
            (Outcome::Pass(_), _) => "pass",
            (Outcome::NotApplicable(_), _) => "n/a",
            (Outcome::Fail { .. }, Level::Required) => "FAIL",
            (Outcome::Fail { .. }, Level::Recommended) => "warn",
            (Outcome::Fail { .. }, Level::Optional) => "no",
        }
    }

    /// Whether this row makes the plugin non-conforming.
    pub(crate) fn is_required_failure(&self) -> bool {
        self.level == Level::Required && matches!(self.outcome, Outcome::Fail { .. })
    }
}

/// Shorthands for check implementations.
pub(crate) fn pass(seen: impl Into<String>) -> Outcome {
    Outcome::Pass(seen.into())
}

pub(crate) fn fail(seen: impl Into<String>, remedy: impl Into<String>) -> Outcome {
    Outcome::Fail {
        seen: seen.into(),
        remedy: remedy.into(),
    }
}

pub(crate) fn not_applicable(why: impl Into<String>) -> Outcome {
    Outcome::NotApplicable(why.into())
}

/// The table of all rows, then a "to fix" list for each row that is not a pass.
#[derive(Debug)]
pub(crate) struct Report<'a> {
    pub(crate) plugin: &'a str,
    pub(crate) results: &'a [CheckResult],
}

/// Longest detail shown in the table; the full text is in the list below it.
const MAX_DETAIL: usize = 90;

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "conformance of {} (docs/PROTOCOL.md)", self.plugin)?;
        let width = self.results.iter().map(|r| r.name.len()).max().unwrap_or(0);
        writeln!(
            f,
            "{:<width$}  {:<6} {:<11} {:<5} detail",
            "check", "§", "level", ""
        )?;
        for r in self.results {
            let level = match r.level {
                Level::Required => "required",
                Level::Optional => "optional",
                Level::Recommended => "recommended",
            };
            let detail = match &r.outcome {
                Outcome::Pass(seen) | Outcome::Fail { seen, .. } | Outcome::NotApplicable(seen) => {
                    seen
                }
            };
            let detail = truncate(detail, MAX_DETAIL);
            writeln!(
                f,
                "{:<width$}  {:<6} {:<11} {:<5} {detail}",
                r.name,
                r.section,
                level,
                r.verdict()
            )?;
        }
        let fixes: Vec<_> = self
            .results
            .iter()
            .filter_map(|r| match &r.outcome {
                Outcome::Fail { seen, remedy } => Some((r, seen, remedy)),
                _ => None,
            })
            .collect();
        if !fixes.is_empty() {
            writeln!(f, "\nto change:")?;
            for (r, seen, remedy) in fixes {
                writeln!(f, "- {} ({}, {}): {seen}", r.name, r.section, r.verdict())?;
                writeln!(f, "  fix: {remedy}")?;
            }
        }
        let failed = self
            .results
            .iter()
            .filter(|r| r.is_required_failure())
            .count();
        if failed == 0 {
            write!(f, "\nresult: conforms ({} checks)", self.results.len())
        } else {
            write!(
                f,
                "\nresult: does not conform ({failed} required checks failed)"
            )
        }
    }
}

fn truncate(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() <= max && !text.contains('\n') {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_required_check_is_listed_with_its_remedy_and_makes_the_result_non_conforming() {
        let results = [
            CheckResult::new("health", "§7", Level::Required, pass("SERVING")),
            CheckResult::new(
                "cookie",
                "§2.2",
                Level::Required,
                fail("exit status 0", "exit non-zero"),
            ),
            CheckResult::new("stdio", "§9", Level::Optional, not_applicable("off")),
        ];
        let text = Report {
            plugin: "p",
            results: &results,
        }
        .to_string();
        assert!(text.contains("cookie"), "{text}");
        assert!(text.contains("FAIL"), "{text}");
        assert!(text.contains("fix: exit non-zero"), "{text}");
        assert!(text.contains("does not conform (1 required"), "{text}");
    }

    #[test]
    fn warnings_and_optional_misses_do_not_make_a_plugin_non_conforming() {
        let results = [
            CheckResult::new("noise", "§3.2", Level::Recommended, fail("a line", "don't")),
            CheckResult::new(
                "stdio",
                "§9",
                Level::Optional,
                fail("not served", "serve it"),
            ),
        ];
        assert!(!results.iter().any(CheckResult::is_required_failure));
        let text = Report {
            plugin: "p",
            results: &results,
        }
        .to_string();
        assert!(
            text.contains("warn") && text.contains("result: conforms"),
            "{text}"
        );
    }
}
