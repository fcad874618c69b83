//! The `streams.Streams` example service and the checks that exercise it, shared by the stream
//! tests of both directions (host → plugin, and plugin → host through the broker).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use tether_sdk::telemetry::TracedChannel;
use tokio::sync::{Notify, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt as _};
use tonic::{Request, Response, Status, Streaming};

use crate::streams_proto::streams_client::StreamsClient;
use crate::streams_proto::streams_server::Streams;
use crate::streams_proto::{CountRequest, Empty, Number, SleepRequest, Stats, StatsRequest};

/// How long `GetStats` waits at most for `wait_for_cancelled`.
pub const STATS_WAIT_LIMIT: Duration = Duration::from_secs(10);

/// Numbers queued per server stream before the sender waits for the client.
const STREAM_QUEUE_LEN: usize = 4;

/// How far past a 100 ms deadline a call may end and still count as ended by the deadline.
const DEADLINE_SLACK: Duration = Duration::from_secs(2);

/// What the service has seen.
#[derive(Debug, Default)]
pub struct StreamsState {
    cancelled: AtomicU32,
    changed: Notify,
}

impl StreamsState {
    /// How many `Count` streams ended because their client went away.
    #[must_use]
    pub fn cancelled(&self) -> u32 {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` streams were cancelled, for at most `limit`.
    pub async fn wait_for_cancelled(&self, n: u32, limit: Duration) -> u32 {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let mut notified = std::pin::pin!(self.changed.notified());
            notified.as_mut().enable();
            let seen = self.cancelled();
            if seen >= n || tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.cancelled();
            }
        }
    }
}

/// The service: every kind of streaming RPC, and the stats that show cancellations.
#[derive(Debug, Clone, Default)]
pub struct StreamsService {
    state: Arc<StreamsState>,
}

impl StreamsService {
    /// A service sharing `state` with the caller.
    #[must_use]
    pub fn new(state: Arc<StreamsState>) -> Self {
        Self { state }
    }
}

type NumberStream = Pin<Box<dyn Stream<Item = Result<Number, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl Streams for StreamsService {
    type CountStream = NumberStream;
    type DoubleStream = NumberStream;

    async fn count(
        &self,
        request: Request<CountRequest>,
    ) -> Result<Response<Self::CountStream>, Status> {
        let n = request.into_inner().n;
        let (tx, rx) = mpsc::channel(STREAM_QUEUE_LEN);
        let state = Arc::clone(&self.state);
        tokio::spawn(async move {
            let mut i = 1_i64;
            while n == 0 || i <= i64::from(n) {
                if tx.send(Ok(Number { value: i })).await.is_err() {
                    // tonic dropped the response stream: the client went away.
                    state.cancelled.fetch_add(1, Ordering::SeqCst);
                    state.changed.notify_waiters();
                    return;
                }
                i += 1;
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn sum(&self, request: Request<Streaming<Number>>) -> Result<Response<Number>, Status> {
        let mut stream = request.into_inner();
        let mut value = 0_i64;
        while let Some(number) = stream.message().await? {
            value = value
                .checked_add(number.value)
                .ok_or_else(|| Status::out_of_range("the sum overflows"))?;
        }
        Ok(Response::new(Number { value }))
    }

    async fn double(
        &self,
        request: Request<Streaming<Number>>,
    ) -> Result<Response<Self::DoubleStream>, Status> {
        let doubled = request.into_inner().map(|number| {
            let number = number?;
            Ok(Number {
                value: number.value.saturating_mul(2),
            })
        });
        Ok(Response::new(Box::pin(doubled)))
    }

    async fn sleep(&self, request: Request<SleepRequest>) -> Result<Response<Empty>, Status> {
        tokio::time::sleep(Duration::from_millis(request.into_inner().millis)).await;
        Ok(Response::new(Empty {}))
    }

    async fn get_stats(&self, request: Request<StatsRequest>) -> Result<Response<Stats>, Status> {
        let wanted = request.into_inner().wait_for_cancelled;
        let cancelled = self
            .state
            .wait_for_cancelled(wanted, STATS_WAIT_LIMIT)
            .await;
        Ok(Response::new(Stats { cancelled }))
    }
}

/// Runs every check against the `Streams` service behind `channel`; one line per check,
/// starting `ok:` or `failed:`.
pub async fn exercise(channel: TracedChannel) -> Vec<String> {
    let mut client = StreamsClient::new(channel);
    let mut results = Vec::new();
    let mut record = |name: &str, outcome: Result<String, String>| {
        results.push(match outcome {
            Ok(detail) => format!("ok: {name}: {detail}"),
            Err(why) => format!("failed: {name}: {why}"),
        });
    };
    record("server streaming", server_streaming(&mut client).await);
    record("client streaming", client_streaming(&mut client).await);
    record("bidirectional", bidirectional(&mut client).await);
    record("cancellation", cancellation(&mut client).await);
    record("deadline", deadline(&mut client).await);
    results
}

async fn server_streaming(client: &mut StreamsClient<TracedChannel>) -> Result<String, String> {
    let mut stream = client
        .count(CountRequest { n: 5 })
        .await
        .map_err(|s| s.to_string())?
        .into_inner();
    let mut got = Vec::new();
    while let Some(number) = stream.message().await.map_err(|s| s.to_string())? {
        got.push(number.value);
    }
    (got == [1, 2, 3, 4, 5])
        .then(|| format!("{got:?}"))
        .ok_or_else(|| format!("got {got:?}"))
}

async fn client_streaming(client: &mut StreamsClient<TracedChannel>) -> Result<String, String> {
    let numbers = tokio_stream::iter((1..=10).map(|value| Number { value }));
    let sum = client
        .sum(numbers)
        .await
        .map_err(|s| s.to_string())?
        .into_inner()
        .value;
    (sum == 55)
        .then(|| format!("sum {sum}"))
        .ok_or_else(|| format!("sum {sum}, want 55"))
}

/// Sends one number, waits for its double, then the next: both directions interleave.
async fn bidirectional(client: &mut StreamsClient<TracedChannel>) -> Result<String, String> {
    let (tx, rx) = mpsc::channel(1);
    let mut replies = client
        .double(ReceiverStream::new(rx))
        .await
        .map_err(|s| s.to_string())?
        .into_inner();
    let mut got = Vec::new();
    for value in [1, 2, 3] {
        tx.send(Number { value }).await.map_err(|e| e.to_string())?;
        let reply = replies
            .message()
            .await
            .map_err(|s| s.to_string())?
            .ok_or("the reply stream ended early")?;
        got.push(reply.value);
    }
    drop(tx);
    let end = replies.message().await.map_err(|s| s.to_string())?;
    if end.is_some() || got != [2, 4, 6] {
        return Err(format!("got {got:?} then {end:?}"));
    }
    Ok(format!("{got:?}"))
}

/// Reads a few numbers of an endless stream, drops it, and asks the server whether it saw the
/// client go away.
async fn cancellation(client: &mut StreamsClient<TracedChannel>) -> Result<String, String> {
    let before = client
        .get_stats(StatsRequest {
            wait_for_cancelled: 0,
        })
        .await
        .map_err(|s| s.to_string())?
        .into_inner()
        .cancelled;
    let mut stream = client
        .count(CountRequest { n: 0 })
        .await
        .map_err(|s| s.to_string())?
        .into_inner();
    for _ in 0..3 {
        stream
            .message()
            .await
            .map_err(|s| s.to_string())?
            .ok_or("the endless stream ended")?;
    }
    drop(stream);
    let after = client
        .get_stats(StatsRequest {
            wait_for_cancelled: before + 1,
        })
        .await
        .map_err(|s| s.to_string())?
        .into_inner()
        .cancelled;
    (after > before)
        .then(|| format!("the server saw the drop ({before} -> {after})"))
        .ok_or_else(|| format!("the server did not see the drop within {STATS_WAIT_LIMIT:?}"))
}

/// A 5 s call with a 100 ms deadline ends soon with the deadline's status — once with the
/// client's own timer (`set_timeout`, which also sends `grpc-timeout`), once with only the
/// `grpc-timeout` header, so that the server must enforce it. tonic reports an expired
/// deadline as `Cancelled: Timeout expired`; other implementations as `DeadlineExceeded`.
async fn deadline(client: &mut StreamsClient<TracedChannel>) -> Result<String, String> {
    let mut timed = Request::new(SleepRequest { millis: 5_000 });
    timed.set_timeout(Duration::from_millis(100));
    let client_side = expired(client, timed).await?;

    let mut header_only = Request::new(SleepRequest { millis: 5_000 });
    header_only.metadata_mut().insert(
        "grpc-timeout",
        tonic::metadata::MetadataValue::from_static("100m"),
    );
    let server_side = expired(client, header_only).await?;
    Ok(format!(
        "client timer: {client_side:?}; server-enforced grpc-timeout: {server_side:?}"
    ))
}

/// Runs `request` and checks it ended by its deadline, within [`DEADLINE_SLACK`].
async fn expired(
    client: &mut StreamsClient<TracedChannel>,
    request: Request<SleepRequest>,
) -> Result<Duration, String> {
    let started = Instant::now();
    let result = client.sleep(request).await;
    let elapsed = started.elapsed();
    let by_deadline = |status: &Status| {
        status.code() == tonic::Code::DeadlineExceeded
            || (status.code() == tonic::Code::Cancelled
                && status.message().contains("Timeout expired"))
    };
    match result {
        Err(status) if by_deadline(&status) && elapsed < DEADLINE_SLACK => Ok(elapsed),
        Err(status) if by_deadline(&status) => Err(format!("deadline hit only after {elapsed:?}")),
        other => Err(format!("{other:?} after {elapsed:?}")),
    }
}
