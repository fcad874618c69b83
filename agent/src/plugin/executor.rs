//! Serving one step function as a `tether.agent.v1.Executor` plugin.

use std::pin::Pin;
use std::process::ExitCode;

use serde_json::{Map, Value};
use tether_sdk::GrpcBroker;
use tonic::{Request, Response, Status};

use super::host_calls::HostCalls;
use super::step_error::StepError;
use crate::v1::executor_server::{Executor, ExecutorServer};
use crate::v1::{ExecuteRequest, ExecuteResponse, Phase};

/// A step: `(params, input)` → `(outputs, one-line summary)`.
pub type StepFn =
    fn(&Map<String, Value>, &Map<String, Value>) -> Result<(Value, String), StepError>;

/// What a step that calls back to the host returns.
pub type StepFuture = Pin<Box<dyn Future<Output = Result<(Value, String), StepError>> + Send>>;

/// A step that calls back to the host: `(host, params, input)` → `(outputs, summary)`.
pub type HostStepFn = fn(HostCalls, Map<String, Value>, Map<String, Value>) -> StepFuture;

/// One of the demo's steps.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    /// Works on its params and input alone.
    Local(StepFn),
    /// Calls back to the host (`tether.agent.v1.Host`) while it works.
    WithHost(HostStepFn),
}

/// Serves `step` as an `Executor` plugin until the host stops it.
#[must_use]
pub fn serve_step(step: Step) -> ExitCode {
    let plugin = tether_sdk::Plugin::new(
        tether_sdk::ServeOptions::new(crate::COOKIE_KEY, crate::COOKIE_VALUE)
            .app_version(crate::APP_VERSION),
    );
    let broker = plugin.broker();
    plugin
        .add_service(ExecutorServer::new(StepExecutor { step, broker }))
        // Lets `tether call --catalog … PLUGIN tether.agent.v1.Executor/Execute …` work without
        // the .proto file.
        .file_descriptor_set(crate::v1::FILE_DESCRIPTOR_SET)
        .run()
}

struct StepExecutor {
    step: Step,
    broker: GrpcBroker,
}

/// Parses a JSON object argument; an empty string is `{}`.
fn object(json: &str, what: &str) -> Result<Map<String, Value>, Status> {
    if json.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str(json) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(Status::invalid_argument(format!(
            "{what} must be a JSON object"
        ))),
        Err(e) => Err(Status::invalid_argument(format!(
            "{what} is not valid JSON: {e}"
        ))),
    }
}

#[tonic::async_trait]
impl Executor for StepExecutor {
    async fn execute(
        &self,
        request: Request<ExecuteRequest>,
    ) -> Result<Response<ExecuteResponse>, Status> {
        let request = request.into_inner();
        let params = object(&request.params_json, "params_json")?;
        let input = object(&request.input_json, "input_json")?;
        let result = match self.step {
            Step::Local(step) => step(&params, &input),
            Step::WithHost(step) => {
                let host = HostCalls::new(self.broker.clone(), request.step.clone());
                step(host, params, input).await
            }
        };
        let response = match result {
            Ok((outputs, message)) => ExecuteResponse {
                phase: Phase::Succeeded.into(),
                outputs_json: outputs.to_string(),
                message,
            },
            Err(StepError(message)) => ExecuteResponse {
                phase: Phase::Failed.into(),
                outputs_json: "{}".to_owned(),
                message: format!("step `{}`: {message}", request.step),
            },
        };
        Ok(Response::new(response))
    }
}

/// The string parameter `key` of a step's `params`, else of its `input` (the previous step's
/// outputs): for a step that takes a value from either.
///
/// # Errors
/// A [`StepError`] naming `key` when neither has it as a string.
pub fn text<'a>(
    params: &'a Map<String, Value>,
    input: &'a Map<String, Value>,
    key: &str,
) -> Result<&'a str, StepError> {
    params
        .get(key)
        .or_else(|| input.get(key))
        .and_then(Value::as_str)
        .ok_or_else(|| {
            StepError(format!(
                "needs a string `{key}` in its params or in the previous step's outputs"
            ))
        })
}
