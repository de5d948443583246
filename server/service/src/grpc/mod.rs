//! The shared gRPC adapters (`ConversationService`, `WorkflowService`) and what every adapter
//! uses: validate, convert proto to domain, call, convert back. No logic lives here. A task
//! workflow's own service lives beside its adapter (`workflows/<name>/`).

use std::future::Future;

use frontdesk_runtime::Event;
use frontdesk_workflows::WorkflowError;
use futures::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;
use tracing::debug;

use crate::{convert, error::to_status};

pub mod conversation;
pub mod request_limit;
pub mod workflow;

/// Page sizes: 0 means the default, anything above the maximum is clamped.
pub(crate) fn page_size(requested: i32) -> Result<usize, tonic::Status> {
    const DEFAULT: usize = 50;
    const MAX: usize = 500;
    match requested {
        0 => Ok(DEFAULT),
        n if n < 0 => Err(crate::error::invalid_argument("page_size", "must not be negative")),
        n => Ok((n as usize).min(MAX)),
    }
}

pub(crate) fn optional(s: String) -> Option<String> {
    if s.is_empty() {
        None
    } else {
        Some(s)
    }
}

/// Streams a run to its caller: every progress item as it happens (run events, and whatever a
/// workflow streams beside them), then the outcome (or the error status that ends the stream). A
/// caller that goes away only stops the forwarding: the run itself goes on and commits.
pub(crate) fn stream_run<P, T, O>(
    progress: impl Stream<Item = P> + Send + 'static,
    wrap_progress: fn(P) -> T,
    outcome: impl Future<Output = Result<O, WorkflowError>> + Send + 'static,
    wrap_outcome: fn(O) -> T,
) -> ReceiverStream<Result<T, Status>>
where
    P: Send + 'static,
    T: Send + 'static,
    O: Send + 'static,
{
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        let mut caller_gone = false;
        let mut progress = std::pin::pin!(progress);
        while let Some(item) = progress.next().await {
            if !caller_gone && tx.send(Ok(wrap_progress(item))).await.is_err() {
                debug!("caller went away during the run");
                caller_gone = true;
            }
        }
        let last = outcome.await.map(wrap_outcome).map_err(to_status);
        if !caller_gone {
            let _ = tx.send(last).await;
        }
    });
    ReceiverStream::new(rx)
}

/// A run's own events, converted, as a stream's progress.
pub(crate) fn run_events(events: mpsc::Receiver<Event>) -> impl Stream<Item = frontdesk_api::v1::RunEvent> + Send {
    ReceiverStream::new(events).map(convert::event)
}
