//! A Prometheus text exposition read by `promcheck` (`tests/otel/promcheck`): promlint's
//! problems (what `promtool check metrics` prints) and the samples Prometheus's own scrape
//! parser takes from it.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::otel::OtelTools;

/// What `promcheck` made of an exposition.
#[derive(Debug, Clone)]
pub struct Checked {
    /// Its exit status: 0 clean, 1 does not parse, 3 lint problems.
    pub status: Option<i32>,
    /// promlint's problems and parse errors, as printed.
    pub stderr: String,
    /// Every sample the parser read.
    pub samples: Vec<Sample>,
    /// Every `# TYPE` line: family name → type.
    pub types: BTreeMap<String, String>,
}

/// One sample as Prometheus's parser read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The series name (`…_bucket`, `…_count`, `…_total` included).
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its value.
    pub value: f64,
}

/// Runs `promcheck` on `exposition`.
///
/// # Panics
/// When `promcheck` cannot run or prints what is not JSON lines.
#[must_use]
pub fn check(tools: &OtelTools, exposition: &str) -> Checked {
    let mut child = Command::new(&tools.promcheck)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promcheck starts");
    child
        .stdin
        .take()
        .expect("a piped stdin")
        .write_all(exposition.as_bytes())
        .expect("promcheck reads the exposition");
    let output = child.wait_with_output().expect("promcheck ends");
    let mut samples = Vec::new();
    let mut types = BTreeMap::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let entry: Value = serde_json::from_str(line).expect("promcheck prints JSON lines");
        if let Some(kind) = entry["type"].as_str() {
            let family = entry["family"].as_str().unwrap_or_default().to_owned();
            types.insert(family, kind.to_owned());
            continue;
        }
        let labels = entry["labels"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
            .collect();
        let value = entry["value"].as_str().unwrap_or_default();
        samples.push(Sample {
            name: entry["name"].as_str().unwrap_or_default().to_owned(),
            labels,
            value: value.parse().unwrap_or(f64::NAN),
        });
    }
    Checked {
        status: output.status.code(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        samples,
        types,
    }
}

impl Checked {
    /// The samples named `name` whose labels include every pair of `labels`.
    #[must_use]
    pub fn find(&self, name: &str, labels: &[(&str, &str)]) -> Vec<&Sample> {
        self.samples
            .iter()
            .filter(|s| {
                s.name == name
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .collect()
    }

    /// The sum of the values of [`find`](Self::find)'s samples (0 when there are none).
    #[must_use]
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.find(name, labels).iter().map(|s| s.value).sum()
    }
}
