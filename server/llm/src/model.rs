//! The provider trait.

use async_trait::async_trait;

use crate::{ChatRequest, ChatResponse, LlmError};

/// A chat model provider.
///
/// Implementations make exactly one attempt per call: retries, pricing and logging live in
/// [`crate::LlmClient`] so every provider gets the same behaviour.
#[async_trait]
pub trait ChatModel: Send + Sync + 'static {
    /// The configured model name (used for pricing and logs when the reply does not say).
    fn model_name(&self) -> &str;

    /// One non-streaming completion.
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError>;

    /// Streaming: calls `on_delta` with each content fragment as it arrives; returns the full response.
    ///
    /// The default implementation calls [`ChatModel::chat`] and emits the whole content once, so
    /// providers without streaming still satisfy callers that want deltas.
    ///
    /// Implementors using `#[async_trait]` must spell the callback type with an explicit
    /// higher-ranked lifetime, `&(dyn for<'d> Fn(&'d str) + Send + Sync)` (the same type as
    /// `&(dyn Fn(&str) + Send + Sync)`): async-trait would otherwise turn the elided `&str` into a
    /// method lifetime parameter and the impl would not match the trait.
    async fn chat_stream(
        &self,
        request: &ChatRequest,
        on_delta: &(dyn for<'d> Fn(&'d str) + Send + Sync),
    ) -> Result<ChatResponse, LlmError> {
        let response = self.chat(request).await?;
        if !response.content.is_empty() {
            on_delta(&response.content);
        }
        Ok(response)
    }
}
