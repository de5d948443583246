//! The shared gRPC adapters (`ConversationService`, `WorkflowService`) and what every adapter
//! uses: validate, convert proto to domain, call, convert back. No logic lives here. A task
//! workflow's own service lives beside its adapter (`workflows/<name>/`).

use std::future::Future;

use frontdesk_runtime::RunEvents;
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

/// Refuses a NUL in any of `fields`, a request's ids and texts as (name in the API, value),
/// before the call reads or writes anything (see `WorkflowError::reject_nul`). For the fields
/// that reach the store with no check of their own; a field a workflow checks further (a
/// conversation id, a key, a turn's text) is refused there.
pub(crate) fn reject_nul(fields: &[(&'static str, &str)]) -> Result<(), Status> {
    WorkflowError::reject_nul_in(fields).map_err(to_status)
}

pub(crate) fn optional(s: String) -> Option<String> {
    if s.is_empty() {
        None
    } else {
        Some(s)
    }
}

/// The sending end of [`responses`].
pub(crate) type ResponseSender<T> = mpsc::Sender<Result<Box<T>, Status>>;

/// A channel whose receiving end is a streaming method's response stream. It carries boxed
/// messages: tokio's channel allocates its slots 32 at a time, and a response message is
/// hundreds of bytes (a `SendMessageResponse` 448), so unboxed slots cost every open stream
/// 14 KB before its first message; boxed, 0.5 KB.
pub(crate) fn responses<T: Send + 'static>(
) -> (ResponseSender<T>, impl Stream<Item = Result<T, Status>> + Send + 'static) {
    let (tx, rx) = mpsc::channel(16);
    (tx, ReceiverStream::new(rx).map(|message: Result<Box<T>, Status>| message.map(|boxed| *boxed)))
}

/// Streams a run to its caller: every progress item as it happens (run events, and whatever a
/// workflow streams beside them), then the outcome (or the error status that ends the stream). A
/// caller that goes away only stops the forwarding: the run itself goes on and commits.
pub(crate) fn stream_run<P, T, O>(
    progress: impl Stream<Item = P> + Send + 'static,
    wrap_progress: fn(P) -> T,
    outcome: impl Future<Output = Result<O, WorkflowError>> + Send + 'static,
    wrap_outcome: fn(O) -> T,
) -> impl Stream<Item = Result<T, Status>> + Send + 'static
where
    P: Send + 'static,
    T: Send + 'static,
    O: Send + 'static,
{
    let (tx, stream) = responses();
    tokio::spawn(async move {
        let mut caller_gone = false;
        let mut progress = std::pin::pin!(progress);
        while let Some(item) = progress.next().await {
            if !caller_gone && tx.send(Ok(Box::new(wrap_progress(item)))).await.is_err() {
                debug!("caller went away during the run");
                caller_gone = true;
            }
        }
        let last = outcome.await.map(|o| Box::new(wrap_outcome(o))).map_err(to_status);
        if !caller_gone {
            let _ = tx.send(last).await;
        }
    });
    stream
}

/// A run's own events, converted, as a stream's progress.
pub(crate) fn run_events(events: RunEvents) -> impl Stream<Item = frontdesk_api::v1::RunEvent> + Send {
    events.map(convert::event)
}
