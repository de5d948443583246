//! The shared gRPC adapters (`ConversationService`, `WorkflowService`) and what every adapter
//! uses: validate, convert proto to domain, call, convert back. No logic lives here. A task
//! workflow's own service lives beside its adapter (`workflows/<name>/`).

use std::future::Future;

use frontdesk_runtime::Event;
use frontdesk_workflows::WorkflowError;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;
use tracing::debug;

use crate::{convert, error::to_status};

pub mod conversation;
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

/// Streams a run to its caller: the `first` items, every run event as it happens, then the
/// outcome (or the error status that ends the stream). A caller that goes away only stops the
/// forwarding: the run itself goes on and commits.
pub(crate) fn stream_run<T, O>(
    first: Vec<T>,
    mut events: mpsc::Receiver<Event>,
    wrap_event: fn(frontdesk_api::v1::RunEvent) -> T,
    outcome: impl Future<Output = Result<O, WorkflowError>> + Send + 'static,
    wrap_outcome: fn(O) -> T,
) -> ReceiverStream<Result<T, Status>>
where
    T: Send + 'static,
    O: Send + 'static,
{
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        let mut caller_gone = false;
        for item in first {
            caller_gone |= tx.send(Ok(item)).await.is_err();
        }
        while let Some(event) = events.recv().await {
            if !caller_gone && tx.send(Ok(wrap_event(convert::event(event)))).await.is_err() {
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
