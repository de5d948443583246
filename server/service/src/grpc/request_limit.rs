//! Oversized requests reported like every other limit.
//!
//! tonic enforces `max_decoding_message_size` itself, in the generated service, before any
//! handler runs, and answers with a bare `OUT_OF_RANGE` status. This layer sits around every
//! service and rewrites that one status (through `error::oversized_request`, the error table's
//! only way in) into `RESOURCE_EXHAUSTED` with `ErrorInfo` reason `LIMIT_EXCEEDED`, as the
//! README promises for limits.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use tonic::{body::Body, Status};
use tower::{Layer, Service};

use crate::error::oversized_request;

/// The layer, given the configured limit (`limits.max_message_bytes`).
#[derive(Debug, Clone, Copy)]
pub struct RequestLimitLayer {
    max_bytes: usize,
}

impl RequestLimitLayer {
    pub fn new(max_bytes: usize) -> Self {
        Self { max_bytes }
    }
}

impl<S> Layer<S> for RequestLimitLayer {
    type Service = RequestLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestLimit { inner, max_bytes: self.max_bytes }
    }
}

#[derive(Debug, Clone)]
pub struct RequestLimit<S> {
    inner: S,
    max_bytes: usize,
}

impl<S, B> Service<http::Request<B>> for RequestLimit<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let response = self.inner.call(request);
        let max_bytes = self.max_bytes;
        Box::pin(async move {
            let response = response.await?;
            // The decoder fails before the handler, so its status is a trailers-only response:
            // in the headers. A handler's own statuses never reach here as OUT_OF_RANGE (no
            // reason in the table has that code), and streamed statuses travel in trailers.
            let rewritten = Status::from_header_map(response.headers())
                .and_then(|status| oversized_request(&status, max_bytes))
                .map(Status::into_http);
            Ok(rewritten.unwrap_or(response))
        })
    }
}
