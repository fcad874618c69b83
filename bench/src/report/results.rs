//! Every round's values, the systems' ids, and each metric's summary (the median round).

use std::collections::BTreeMap;

use crate::stats::median;
use crate::suite::Value;

/// The id of the primary baseline (newest go-plugin).
pub const BASELINE: &str = "go18";

/// The id of the raw unix-socket floor.
pub const FLOOR: &str = "floor";

/// The id of the system being judged.
pub const TETHER: &str = "tether";

/// Every round's value of every metric of every system.
#[derive(Debug, Clone, Default)]
pub struct Results {
    values: BTreeMap<(String, String), Vec<Value>>,
    errors: Vec<String>,
}

/// A metric of one system over all rounds.
#[derive(Debug, Clone, PartialEq)]
pub enum Summary {
    /// The median round.
    Median(f64),
    /// At least one round failed with this gRPC code.
    Failed(String),
}

/// Ratios of runs made side by side ([`Results::paired_ratios`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paired {
    /// The median of the pairs' ratios.
    pub median: f64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
    /// How many pairs.
    pub pairs: usize,
}

impl Results {
    /// Records one round's `value` of `metric` for `system`.
    pub fn record(&mut self, system: &str, metric: &str, value: Value) {
        self.values
            .entry((system.to_owned(), metric.to_owned()))
            .or_default()
            .push(value);
    }

    /// Records a run that produced no values (the program failed).
    pub fn record_error(&mut self, error: String) {
        self.errors.push(error);
    }

    /// The runs that failed.
    #[must_use]
    pub fn errors(&self) -> &[String] {
        &self.errors
    }

    /// The rounds' values of `metric` for `system`.
    #[must_use]
    pub fn rounds(&self, system: &str, metric: &str) -> &[Value] {
        self.values
            .get(&(system.to_owned(), metric.to_owned()))
            .map_or(&[], Vec::as_slice)
    }

    /// The median round, or the failure if any round failed; `None` if never measured.
    #[must_use]
    pub fn summary(&self, system: &str, metric: &str) -> Option<Summary> {
        let rounds = self.rounds(system, metric);
        if let Some(code) = rounds.iter().find_map(|v| match v {
            Value::Failed(code) => Some(code.clone()),
            Value::Number(_) => None,
        }) {
            return Some(Summary::Failed(code));
        }
        let numbers: Vec<f64> = rounds
            .iter()
            .filter_map(|v| match v {
                Value::Number(n) => Some(*n),
                Value::Failed(_) => None,
            })
            .collect();
        median(&numbers).map(Summary::Median)
    }

    /// `system`'s value of `metric` divided by `other`'s, round by round (run *i* of one against
    /// run *i* of the other: the runs made side by side), when every round of both is a
    /// number and they have as many rounds.
    #[must_use]
    pub fn paired_ratios(&self, system: &str, other: &str, metric: &str) -> Option<Paired> {
        let numbers = |id: &str| -> Option<Vec<f64>> {
            self.rounds(id, metric)
                .iter()
                .map(|v| match v {
                    Value::Number(n) => Some(*n),
                    Value::Failed(_) => None,
                })
                .collect()
        };
        let (a, b) = (numbers(system)?, numbers(other)?);
        if a.len() != b.len() || b.iter().any(|&v| v <= 0.0) {
            return None;
        }
        let ratios: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x / y).collect();
        Some(Paired {
            median: median(&ratios)?,
            min: ratios.iter().copied().fold(f64::INFINITY, f64::min),
            max: ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            pairs: ratios.len(),
        })
    }

    /// The median of `system` divided by the median of `other`, when both are numbers.
    #[must_use]
    pub fn ratio(&self, system: &str, other: &str, metric: &str) -> Option<f64> {
        match (self.summary(system, metric)?, self.summary(other, metric)?) {
            (Summary::Median(a), Summary::Median(b)) if b > 0.0 => Some(a / b),
            _ => None,
        }
    }
}
