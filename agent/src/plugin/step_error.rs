//! Why a step failed, as the step function says it.

/// Why a step failed: one sentence saying what is wrong and what to do. It is returned to the
/// host as [`Phase::Failed`](crate::v1::Phase::Failed) with this message (not as a gRPC error: the plugin works, the
/// step does not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepError(pub String);

impl<T: std::fmt::Display> From<T> for StepError {
    fn from(message: T) -> Self {
        Self(message.to_string())
    }
}
