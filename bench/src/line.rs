//! The one-line output of `kv-bench measure`, `kvhost measure` and `pingpong`.
//!
//! Space-separated `key=value` pairs; a sample list is comma-separated nanoseconds:
//! `samples_ns=51234,49876`, `calls=1000 elapsed_ns=51234567`, `failed=ResourceExhausted`.

use std::collections::BTreeMap;

/// A measurement line, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    fields: BTreeMap<String, String>,
}

/// Why a measurement line could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LineError {
    /// The program printed no line.
    #[error("the program printed no measurement line")]
    Empty,
    /// A word is not `key=value`.
    #[error("{word:?} is not a key=value pair")]
    NotAPair {
        /// The offending word.
        word: String,
    },
    /// A key occurs twice.
    #[error("key {key:?} occurs twice")]
    Duplicate {
        /// The repeated key.
        key: String,
    },
    /// A key the metric needs is missing.
    #[error("key {key:?} is missing")]
    Missing {
        /// The missing key.
        key: String,
    },
    /// A value is not a (list of) non-negative integer(s).
    #[error("{key}={value:?} is not a non-negative integer (list)")]
    NotANumber {
        /// The key.
        key: String,
        /// Its value.
        value: String,
    },
}

impl Line {
    /// Parses the last non-empty line of `output` (programs print exactly one; anything
    /// before it would be a stray message).
    ///
    /// ```
    /// let line = tether_bench::line::Line::parse("calls=10 elapsed_ns=2000\n").unwrap();
    /// assert_eq!(line.number("calls").unwrap(), 10);
    /// ```
    ///
    /// # Errors
    /// [`LineError::Empty`], [`LineError::NotAPair`] or [`LineError::Duplicate`].
    pub fn parse(output: &str) -> Result<Self, LineError> {
        let text = output
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .ok_or(LineError::Empty)?;
        let mut fields = BTreeMap::new();
        for word in text.split_whitespace() {
            let (key, value) = word.split_once('=').ok_or_else(|| LineError::NotAPair {
                word: word.to_owned(),
            })?;
            if key.is_empty() {
                return Err(LineError::NotAPair {
                    word: word.to_owned(),
                });
            }
            if fields.insert(key.to_owned(), value.to_owned()).is_some() {
                return Err(LineError::Duplicate {
                    key: key.to_owned(),
                });
            }
        }
        Ok(Self { fields })
    }

    /// The raw value of `key`, if present.
    #[must_use]
    pub fn text(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(String::as_str)
    }

    /// The value of `key` as a non-negative integer.
    ///
    /// # Errors
    /// [`LineError::Missing`] or [`LineError::NotANumber`].
    pub fn number(&self, key: &str) -> Result<u64, LineError> {
        let value = self.required(key)?;
        value.parse().map_err(|_| LineError::NotANumber {
            key: key.to_owned(),
            value: value.to_owned(),
        })
    }

    /// The value of `key` as a comma-separated list of non-negative integers (at least one).
    ///
    /// # Errors
    /// [`LineError::Missing`] or [`LineError::NotANumber`] (also for an empty list).
    pub fn numbers(&self, key: &str) -> Result<Vec<u64>, LineError> {
        let value = self.required(key)?;
        value
            .split(',')
            .map(|n| n.parse::<u64>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| LineError::NotANumber {
                key: key.to_owned(),
                value: value.to_owned(),
            })
    }

    fn required(&self, key: &str) -> Result<&str, LineError> {
        self.text(key).ok_or_else(|| LineError::Missing {
            key: key.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_list_parses_into_its_numbers_in_order() {
        let line = Line::parse("samples_ns=30,10,20").unwrap();
        assert_eq!(line.numbers("samples_ns").unwrap(), vec![30, 10, 20]);
    }

    #[test]
    fn only_the_last_non_empty_line_counts() {
        let line = Line::parse("warning: something\nrss_kb=7728\n\n").unwrap();
        assert_eq!(line.number("rss_kb").unwrap(), 7728);
    }

    #[test]
    fn a_word_without_an_equals_sign_is_rejected() {
        assert_eq!(
            Line::parse("calls=3 oops").unwrap_err(),
            LineError::NotAPair {
                word: "oops".into()
            }
        );
    }

    #[test]
    fn a_repeated_key_is_rejected() {
        assert!(matches!(
            Line::parse("a=1 a=2"),
            Err(LineError::Duplicate { .. })
        ));
    }

    #[test]
    fn empty_output_is_an_error() {
        assert_eq!(Line::parse(" \n").unwrap_err(), LineError::Empty);
    }

    #[test]
    fn a_missing_key_and_a_non_number_are_told_apart() {
        let line = Line::parse("failed=ResourceExhausted samples_ns=1,,2").unwrap();
        assert_eq!(line.text("failed"), Some("ResourceExhausted"));
        assert!(matches!(
            line.number("bytes"),
            Err(LineError::Missing { .. })
        ));
        assert!(matches!(
            line.numbers("samples_ns"),
            Err(LineError::NotANumber { .. })
        ));
        assert!(matches!(
            line.number("failed"),
            Err(LineError::NotANumber { .. })
        ));
    }
}
