//! [`LlmClient`]: the handle workflows use.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use serde_json::Value;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::schema::{extract_json, make_strict, schema_for, schema_name};
use crate::{
    CallFailure, CallLog, CallRecord, ChatMessage, ChatModel, ChatRequest, ChatResponse, JsonSchemaFormat, LlmError,
    PriceTable, RetryPolicy, Role,
};

/// Per-call options.
#[derive(Clone, Copy, Default)]
pub struct CallOptions<'a> {
    /// Absolute deadline: the in-flight request is abandoned with [`LlmError::Timeout`] when it passes,
    /// and no retry is started whose backoff would end after it.
    pub deadline: Option<Instant>,
    /// When cancelled, the in-flight request (or backoff sleep) is dropped and [`LlmError::Cancelled`] returned.
    pub cancel: Option<&'a CancellationToken>,
    /// When set, the call streams and this receives each content fragment in order.
    pub on_delta: Option<&'a (dyn Fn(&str) + Send + Sync)>,
}

impl std::fmt::Debug for CallOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallOptions")
            .field("deadline", &self.deadline)
            .field("cancel", &self.cancel.map(|c| c.is_cancelled()))
            .field("on_delta", &self.on_delta.is_some())
            .finish()
    }
}

/// The handle workflows use: wraps a provider with retries, pricing, recording and structured output.
///
/// Cheap to clone; clones share the provider, prices and call logs.
#[derive(Clone)]
pub struct LlmClient {
    model: Arc<dyn ChatModel>,
    retry: RetryPolicy,
    prices: Arc<PriceTable>,
    call_logs: Arc<[Arc<dyn CallLog>]>,
}

impl std::fmt::Debug for LlmClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmClient")
            .field("model", &self.model.model_name())
            .field("retry", &self.retry)
            .field("priced_models", &self.prices.models.len())
            .field("call_logs", &self.call_logs.len())
            .finish()
    }
}

/// The instruction added to structured-output requests. Kept short: the schema itself goes in
/// `response_format`, and is repeated here only for servers that ignore `response_format`,
/// compactly ([`prompt_schema`]): every object of a strict schema with listed properties requires
/// all of them and allows no others, which this line says once instead of every object's
/// `required` and `additionalProperties` saying it again.
const JSON_ONLY_INSTRUCTION: &str = "Reply with only a JSON value matching this schema (no prose, no code fences). \
     An object with listed properties needs all of them and no others:";

/// `schema` as the instruction shows it: without what [`JSON_ONLY_INSTRUCTION`] says for every
/// object (`additionalProperties: false`, and `required` when it lists every property). Anything
/// else (a map's `additionalProperties` schema, a partial `required`, descriptions, enums,
/// limits) stays. `response_format` carries the schema unchanged.
fn prompt_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let all_required = match (map.get("properties"), map.get("required")) {
                (Some(Value::Object(properties)), Some(Value::Array(required))) => {
                    required.len() == properties.len()
                        && required.iter().all(|name| name.as_str().is_some_and(|n| properties.contains_key(n)))
                }
                (None, Some(Value::Array(required))) => required.is_empty(),
                _ => false,
            };
            let mut out = serde_json::Map::new();
            for (key, value) in map {
                match key.as_str() {
                    "additionalProperties" if *value == Value::Bool(false) => {}
                    "required" if all_required => {}
                    // Data, not schemas: kept as they are.
                    "enum" | "const" | "default" | "examples" | "required" => {
                        out.insert(key.clone(), value.clone());
                    }
                    "properties" | "$defs" | "definitions" => {
                        let children = match value {
                            Value::Object(children) => {
                                Value::Object(children.iter().map(|(k, v)| (k.clone(), prompt_schema(v))).collect())
                            }
                            other => other.clone(),
                        };
                        out.insert(key.clone(), children);
                    }
                    _ => {
                        out.insert(key.clone(), prompt_schema(value));
                    }
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(prompt_schema).collect()),
        other => other.clone(),
    }
}

impl LlmClient {
    /// A client with the default [`RetryPolicy`], no prices and no call log.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        Self { model, retry: RetryPolicy::default(), prices: Arc::new(PriceTable::default()), call_logs: Arc::new([]) }
    }

    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    pub fn with_prices(mut self, prices: PriceTable) -> Self {
        self.prices = Arc::new(prices);
        self
    }

    /// Adds a call log: every call made through this client (and its clones made afterwards)
    /// goes to each log added, in the order they were added.
    pub fn with_call_log(mut self, call_log: Arc<dyn CallLog>) -> Self {
        let mut logs = self.call_logs.to_vec();
        logs.push(call_log);
        self.call_logs = logs.into();
        self
    }

    pub fn model_name(&self) -> &str {
        self.model.model_name()
    }

    /// The underlying provider.
    pub fn model(&self) -> &Arc<dyn ChatModel> {
        &self.model
    }

    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.retry
    }

    pub fn prices(&self) -> &PriceTable {
        &self.prices
    }

    /// Plain text call with retries.
    ///
    /// Retryable failures ([`LlmError::is_retryable`]) are retried with full-jitter backoff, waiting at
    /// least the provider's Retry-After; after `max_attempts`, or when the next wait would pass
    /// `opts.deadline`, the result is [`LlmError::Exhausted`] wrapping the last error. A streamed
    /// attempt that already delivered deltas is not retried, so a consumer never sees text twice.
    /// Every outcome goes to the call log, and a failure comes with its record too
    /// ([`CallFailure`]): a reply that arrived and was refused was billed all the same.
    ///
    /// This is the call for requests that offer tools: the reply's [`ChatResponse::tool_calls`]
    /// come back as the provider returned them, and a tool-call reply counts in usage, cost, the
    /// record and the call log like any other.
    pub async fn complete(
        &self,
        request: ChatRequest,
        opts: &CallOptions<'_>,
    ) -> Result<(ChatResponse, CallRecord), CallFailure> {
        self.complete_ref(&request, opts).await
    }

    /// [`LlmClient::complete`] for a request the caller keeps (a structured call keeps it for
    /// the repair attempt).
    async fn complete_ref(
        &self,
        request: &ChatRequest,
        opts: &CallOptions<'_>,
    ) -> Result<(ChatResponse, CallRecord), CallFailure> {
        let started = Instant::now();
        let mut attempts = 0u32;
        let outcome = loop {
            attempts += 1;
            let streamed_something = AtomicBool::new(false);
            let result = self.attempt(request, opts, &streamed_something).await;
            let error = match result {
                Ok(response) => break Ok(response),
                Err(e) => e,
            };
            if !error.is_retryable() || streamed_something.load(Ordering::Relaxed) {
                break Err(error);
            }
            if attempts >= self.retry.max_attempts {
                tracing::warn!(purpose = %request.purpose, attempts, error = %error, "llm call retries exhausted");
                break Err(LlmError::Exhausted { attempts, last: Box::new(error) });
            }
            let wait = self.retry.wait_before_retry(attempts, error.retry_after());
            if let Some(deadline) = opts.deadline {
                if Instant::now() + wait > deadline {
                    tracing::warn!(
                        purpose = %request.purpose,
                        attempts,
                        wait_ms = millis(wait),
                        error = %error,
                        "llm call gives up: next retry would pass the deadline"
                    );
                    break Err(LlmError::Exhausted { attempts, last: Box::new(error) });
                }
            }
            tracing::info!(
                purpose = %request.purpose,
                attempt = attempts,
                wait_ms = millis(wait),
                error = %error,
                "llm call failed, retrying"
            );
            let sleep = tokio::time::sleep(wait);
            match opts.cancel {
                Some(token) => tokio::select! {
                    biased;
                    _ = token.cancelled() => break Err(LlmError::Cancelled),
                    _ = sleep => {}
                },
                None => sleep.await,
            }
        };

        let latency = started.elapsed();
        let (usage, model) = match &outcome {
            Ok(r) => (r.usage, r.model.clone()),
            // A reply that arrived and was then refused (cut short, filtered) was billed all the same.
            Err(e) => (e.usage().unwrap_or_default(), self.model.model_name().to_owned()),
        };
        let record = CallRecord {
            purpose: request.purpose.clone(),
            cost_usd: self.prices.cost(&model, usage),
            model,
            usage,
            latency,
            attempts,
            context: request.context.clone(),
            at: std::time::SystemTime::now(),
        };
        for log in self.call_logs.iter() {
            match &outcome {
                Ok(r) => log.record(request, Some(r), &record, None),
                Err(e) => log.record(request, None, &record, Some(e)),
            }
        }
        match outcome {
            Ok(response) => Ok((response, record)),
            Err(error) => Err(CallFailure { error, record }),
        }
    }

    /// One provider attempt, bounded by cancellation and the deadline.
    async fn attempt(
        &self,
        request: &ChatRequest,
        opts: &CallOptions<'_>,
        streamed_something: &AtomicBool,
    ) -> Result<ChatResponse, LlmError> {
        if opts.cancel.is_some_and(CancellationToken::is_cancelled) {
            return Err(LlmError::Cancelled);
        }
        let call = async {
            match opts.on_delta {
                Some(on_delta) => {
                    let tracked = |delta: &str| {
                        streamed_something.store(true, Ordering::Relaxed);
                        on_delta(delta);
                    };
                    self.model.chat_stream(request, &tracked).await
                }
                None => self.model.chat(request).await,
            }
        };
        let bounded = async {
            match opts.deadline {
                Some(deadline) => tokio::time::timeout_at(deadline, call).await.unwrap_or(Err(LlmError::Timeout)),
                None => call.await,
            }
        };
        match opts.cancel {
            Some(token) => tokio::select! {
                biased;
                _ = token.cancelled() => Err(LlmError::Cancelled),
                result = bounded => result,
            },
            None => bounded.await,
        }
    }

    /// Structured output: asks for JSON matching `T`'s schema and deserializes the reply into `T`.
    ///
    /// The schema (from [`schema_for`], generated once per type) is sent as described on
    /// [`LlmClient::structured_with`].
    pub async fn structured<T>(
        &self,
        request: ChatRequest,
        opts: &CallOptions<'_>,
    ) -> Result<(T, CallRecord), CallFailure>
    where
        T: serde::de::DeserializeOwned + schemars::JsonSchema + 'static,
    {
        self.structured_with::<T>(request, &OutputSchema::of::<T>(), opts).await
    }

    /// Structured output with a schema the caller built, for replies whose allowed values come from
    /// configuration (field names, team ids): with the values in the schema, a provider that
    /// constrains decoding (llama.cpp's grammar, OpenAI's strict mode) cannot produce any other.
    ///
    /// The schema is sent as a strict `json_schema` response format named after the purpose, and a
    /// system line asks for JSON only. The reply is parsed tolerantly ([`extract_json`]) and
    /// validated by deserializing into `T`. On failure the model gets ONE repair attempt that sees
    /// its previous reply and the validation error; if that fails too the result is
    /// [`LlmError::InvalidOutput`]. The returned record, of a failure too, sums usage, cost,
    /// latency and attempts of both calls.
    pub async fn structured_with<T>(
        &self,
        request: ChatRequest,
        schema: &OutputSchema,
        opts: &CallOptions<'_>,
    ) -> Result<(T, CallRecord), CallFailure>
    where
        T: serde::de::DeserializeOwned,
    {
        self.structured_checked(request, schema, opts, |_: &T| Ok(())).await
    }

    /// [`LlmClient::structured_with`] plus a check of the parsed value: a reply the check refuses
    /// (an `Err` with the reason) is invalid output exactly like one that does not parse, so it
    /// gets the repair attempt and, failing that, [`LlmError::InvalidOutput`].
    ///
    /// A schema constrains only the providers that decode under it; an endpoint that ignores
    /// `response_format` can still answer with a value outside an `enum` built from
    /// configuration, and only a check on our side catches it.
    ///
    /// The structured helpers parse content, so they are not for requests whose reply may call
    /// tools: a reply with [`ChatResponse::tool_calls`] (the request offered tools and the model
    /// used them) fails at once, without a repair attempt, with [`LlmError::Config`] of field
    /// [`STRUCTURED_TOOL_CALLS`] naming the tools called. Use [`LlmClient::complete`] for such
    /// requests. A request that offers tools but is answered with content is parsed as usual.
    pub async fn structured_checked<T>(
        &self,
        request: ChatRequest,
        schema: &OutputSchema,
        opts: &CallOptions<'_>,
        check: impl Fn(&T) -> Result<(), String>,
    ) -> Result<(T, CallRecord), CallFailure>
    where
        T: serde::de::DeserializeOwned,
    {
        let parse = |content: &str| parse_structured::<T>(content).and_then(|value| check(&value).map(|()| value));
        let mut request = request;
        match request.messages.first_mut() {
            // Several chat templates (llama.cpp, Ollama) only allow one leading system message.
            Some(first) if first.role == Role::System => {
                first.content.push_str("\n\n");
                first.content.push_str(&schema.instruction);
            }
            _ => request.messages.insert(0, ChatMessage::system(schema.instruction.to_string())),
        }
        request.response_format =
            Some(JsonSchemaFormat { name: schema_name(&request.purpose), schema: schema.schema.clone() });

        let (response, mut record) = self.complete_ref(&request, opts).await?;
        if let Err(error) = refuse_tool_calls(&request.purpose, &response) {
            return Err(CallFailure { error, record });
        }
        tracing::debug!(purpose = %request.purpose, reply = %response.content, "structured reply");
        let first_error = match parse(&response.content) {
            Ok(value) => return Ok((value, record)),
            Err(e) => e,
        };
        tracing::warn!(
            purpose = %request.purpose,
            error = %first_error,
            reply_chars = response.content.chars().count(),
            "structured output invalid, asking the model to repair it"
        );

        request.messages.push(ChatMessage::assistant(response.content));
        request.messages.push(ChatMessage::user(format!(
            "Your previous reply could not be used: {first_error}. Reply again with only the corrected JSON, \
             matching the schema exactly."
        )));
        let repaired = match self.complete_ref(&request, opts).await {
            Ok((repaired, repair_record)) => {
                record.absorb(&repair_record);
                repaired
            }
            Err(failure) => {
                record.absorb(&failure.record);
                return Err(CallFailure { error: failure.error, record });
            }
        };
        if let Err(error) = refuse_tool_calls(&request.purpose, &repaired) {
            return Err(CallFailure { error, record });
        }
        match parse(&repaired.content) {
            Ok(value) => Ok((value, record)),
            Err(error) => {
                tracing::warn!(purpose = %request.purpose, error = %error, "structured output still invalid after repair");
                Err(CallFailure {
                    error: LlmError::InvalidOutput { attempts: 2, error, raw: repaired.content },
                    record,
                })
            }
        }
    }
}

/// The JSON schema of a structured reply and the system instruction that carries it.
///
/// Cheap to clone. Build one per type with [`OutputSchema::of`] (cached), or once per
/// configuration with [`OutputSchema::new`] when the allowed values are data.
#[derive(Debug, Clone)]
pub struct OutputSchema {
    schema: Arc<Value>,
    instruction: Arc<str>,
}

impl OutputSchema {
    /// A schema written by hand or patched from [`schema_for`]; it is made strict the same way
    /// (every object closed, every property required).
    pub fn new(mut schema: Value) -> Self {
        make_strict(&mut schema);
        let instruction: Arc<str> = format!("{JSON_ONLY_INSTRUCTION}\n{}", prompt_schema(&schema)).into();
        Self { schema: Arc::new(schema), instruction }
    }

    /// The system text a structured call appends to the request's first system message (or
    /// sends as one): the JSON-only instruction and the schema, compact. For callers that
    /// count what a request carries.
    pub fn instruction(&self) -> &str {
        &self.instruction
    }

    /// `T`'s schema, generated once per type: schemars builds it by walking the type, which costs
    /// more than a scripted model's whole reply.
    pub fn of<T: schemars::JsonSchema + 'static>() -> Self {
        type Cache = Mutex<HashMap<TypeId, OutputSchema>>;
        static CACHE: OnceLock<Cache> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        if let Some(hit) = cache.lock().unwrap_or_else(PoisonError::into_inner).get(&TypeId::of::<T>()) {
            return hit.clone();
        }
        let entry = Self::new(schema_for::<T>());
        cache.lock().unwrap_or_else(PoisonError::into_inner).insert(TypeId::of::<T>(), entry.clone());
        entry
    }

    /// The schema as sent in `response_format`.
    pub fn schema(&self) -> &Value {
        &self.schema
    }
}

/// The `field` of the [`LlmError::Config`] a structured helper returns when the reply called tools
/// (see [`LlmClient::structured_checked`]).
pub const STRUCTURED_TOOL_CALLS: &str = "structured.tool_calls";

/// A structured helper's reply must be content: tool calls have nothing to parse, and the caller,
/// which cannot run them, used the wrong helper for a request that offers tools.
fn refuse_tool_calls(purpose: &str, response: &ChatResponse) -> Result<(), LlmError> {
    if response.tool_calls.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = response.tool_calls.iter().map(|call| call.name.as_str()).collect();
    tracing::warn!(purpose, tools = ?names, "structured call answered with tool calls");
    Err(LlmError::Config {
        field: STRUCTURED_TOOL_CALLS,
        problem: format!(
            "the model answered the structured call {purpose:?} with tool calls {names:?} instead of a value; \
             a request that offers tools needs LlmClient::complete, which returns them"
        ),
    })
}

fn parse_structured<T: serde::de::DeserializeOwned>(content: &str) -> Result<T, String> {
    let value = extract_json(content)?;
    serde_json::from_value::<T>(value).map_err(|e| format!("the JSON does not match the schema: {e}"))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;
    use crate::{ScriptedModel, ScriptedReply, TokenUsage};

    #[derive(Debug, Deserialize)]
    struct Pick {
        team_id: String,
    }

    #[tokio::test]
    async fn a_value_the_check_refuses_is_invalid_output_and_gets_the_repair_attempt() {
        let model = Arc::new(ScriptedModel::new("s"));
        model.push_reply(ScriptedReply::json(&serde_json::json!({"team_id": "made-up"})));
        model.push_reply(ScriptedReply::json(&serde_json::json!({"team_id": "ops"})));
        let client = LlmClient::new(model.clone());
        let schema =
            OutputSchema::new(serde_json::json!({"type": "object", "properties": {"team_id": {"type": "string"}}}));
        let check = |p: &Pick| if p.team_id == "ops" { Ok(()) } else { Err(format!("{:?} is not a team", p.team_id)) };
        let request =
            ChatRequest { purpose: "pick".into(), messages: vec![ChatMessage::user("?")], ..Default::default() };
        let (pick, record) =
            client.structured_checked(request.clone(), &schema, &CallOptions::default(), check).await.unwrap();
        assert_eq!(pick.team_id, "ops");
        assert_eq!(record.attempts, 2, "the refused reply and the repair");
        let repair = model.requests()[1].messages.last().unwrap().content.clone();
        assert!(repair.contains("\"made-up\" is not a team"), "the repair prompt names the reason: {repair}");

        model.push_reply(ScriptedReply::json(&serde_json::json!({"team_id": "x"})));
        model.push_reply(ScriptedReply::json(&serde_json::json!({"team_id": "y"})));
        let error =
            client.structured_checked(request, &schema, &CallOptions::default(), check).await.unwrap_err().error;
        assert!(matches!(error, LlmError::InvalidOutput { attempts: 2, .. }), "{error}");
    }

    /// The usage each request of a call logged.
    #[derive(Default)]
    struct Usages(Mutex<Vec<TokenUsage>>);

    impl CallLog for Usages {
        fn record(&self, _: &ChatRequest, _: Option<&ChatResponse>, record: &CallRecord, _: Option<&LlmError>) {
            self.0.lock().unwrap().push(record.usage);
        }
    }

    /// Both replies of a structured call that failed arrived, and were billed: its failure
    /// carries their record, as a success would, so a run counts what it spent.
    #[tokio::test]
    async fn a_structured_call_that_fails_returns_the_record_of_every_reply_it_got() {
        let model = Arc::new(ScriptedModel::new("s"));
        let logged = Arc::new(Usages::default());
        let client = LlmClient::new(model.clone())
            .with_retry(RetryPolicy { initial_backoff: Duration::ZERO, ..RetryPolicy::default() })
            .with_prices(PriceTable::default().with_model("s", 1_000_000.0, 2_000_000.0))
            .with_call_log(logged.clone());
        let request =
            || ChatRequest { purpose: "pick".into(), messages: vec![ChatMessage::user("?")], ..Default::default() };
        let take = || std::mem::take(&mut *logged.0.lock().unwrap());

        model.push_reply(ScriptedReply::text("not json at all"));
        model.push_reply(ScriptedReply::text("still not json"));
        let failure = client.structured::<serde_json::Map<String, Value>>(request(), &CallOptions::default()).await;
        let failure = failure.unwrap_err();
        assert!(matches!(failure.error, LlmError::InvalidOutput { .. }), "{failure}");
        let [first, repair] = take()[..] else { panic!("two requests") };
        assert!(first.completion_tokens > 0 && repair.completion_tokens > 0);
        assert_eq!(failure.record.usage, first + repair, "the first reply and the repair");
        assert_eq!(failure.record.attempts, 2);
        let usage = first + repair;
        let cost = usage.prompt_tokens as f64 + 2.0 * usage.completion_tokens as f64;
        assert!((failure.record.cost_usd - cost).abs() < 1e-9, "{} against {cost}", failure.record.cost_usd);

        // The repair attempt itself failed (the provider kept failing): the first reply still counts.
        model.push_reply(ScriptedReply::text("not json either"));
        for _ in 0..RetryPolicy::default().max_attempts {
            model.push_reply(ScriptedReply::failure(crate::ScriptedFailure::Server { status: 503 }));
        }
        let failure = client.structured::<serde_json::Map<String, Value>>(request(), &CallOptions::default()).await;
        let failure = failure.unwrap_err();
        assert!(matches!(failure.error, LlmError::Exhausted { .. }), "{failure}");
        let [first, failed] = take()[..] else { panic!("two calls logged") };
        assert_eq!(failed, TokenUsage::default());
        assert_eq!(failure.record.usage, first, "the reply that arrived, not the failed attempts");
        assert_eq!(failure.record.attempts, 1 + RetryPolicy::default().max_attempts);
    }

    /// What the call log saw of one call: purpose, tool call names, completion tokens, error kind.
    type SeenCall = (String, Vec<String>, u64, &'static str);

    #[derive(Default)]
    struct SeenCalls(Mutex<Vec<SeenCall>>);

    impl CallLog for SeenCalls {
        fn record(
            &self,
            request: &ChatRequest,
            response: Option<&ChatResponse>,
            record: &CallRecord,
            error: Option<&LlmError>,
        ) {
            let names = response.map(|r| r.tool_calls.iter().map(|c| c.name.clone()).collect()).unwrap_or_default();
            let kind = error.map(LlmError::kind).unwrap_or("");
            self.0.lock().unwrap().push((request.purpose.clone(), names, record.usage.completion_tokens, kind));
        }
    }

    #[derive(Default)]
    struct SeenContexts(Mutex<Vec<Option<crate::CallContext>>>);

    impl CallLog for SeenContexts {
        fn record(&self, _: &ChatRequest, _: Option<&ChatResponse>, record: &CallRecord, _: Option<&LlmError>) {
            self.0.lock().unwrap().push(record.context.clone());
        }
    }

    #[tokio::test]
    async fn every_call_log_gets_every_call_with_who_made_it() {
        let model = Arc::new(ScriptedModel::new("s"));
        model.push_reply(ScriptedReply::text("not json"));
        model.push_reply(ScriptedReply::json(&serde_json::json!({"team_id": "ops"})));
        let (first, second) = (Arc::new(SeenContexts::default()), Arc::new(SeenContexts::default()));
        let client = LlmClient::new(model.clone()).with_call_log(first.clone()).with_call_log(second.clone());
        let context = crate::CallContext { thread_id: "t".into(), run_id: "r".into(), node: "n".into() };
        let request =
            ChatRequest { context: Some(context.clone()), ..ChatRequest::new("pick", vec![ChatMessage::user("?")]) };
        let schema =
            OutputSchema::new(serde_json::json!({"type": "object", "properties": {"team_id": {"type": "string"}}}));
        let (_, record) = client.structured_with::<Pick>(request, &schema, &CallOptions::default()).await.unwrap();
        assert_eq!(record.context.as_ref(), Some(&context), "the folded record keeps who made the call");
        for log in [first, second] {
            assert_eq!(*log.0.lock().unwrap(), vec![Some(context.clone()); 2], "the reply and its repair");
        }
        assert!(model.requests().iter().all(|r| r.context.as_ref() == Some(&context)));
    }

    fn offering_lookup(purpose: &str) -> ChatRequest {
        ChatRequest {
            tools: vec![crate::ToolSpec {
                name: "lookup_user".into(),
                description: "Look up a user.".into(),
                parameters: serde_json::json!({"type": "object", "properties": {"user_id": {"type": "string"}}}),
            }],
            ..ChatRequest::new(purpose, vec![ChatMessage::user("who is u002?")])
        }
    }

    #[tokio::test]
    async fn complete_returns_tool_calls_unchanged_and_counts_them() {
        let model = Arc::new(
            ScriptedModel::new("s")
                .with_reply(ScriptedReply::tool_call("lookup_user", serde_json::json!({"user_id": "u002"}))),
        );
        let log = Arc::new(SeenCalls::default());
        let client = LlmClient::new(model.clone())
            .with_prices(PriceTable::default().with_model("s", 1_000_000.0, 1_000_000.0))
            .with_call_log(log.clone());
        let (response, record) =
            client.complete(offering_lookup("investigate"), &CallOptions::default()).await.unwrap();
        assert_eq!(
            response.tool_calls,
            vec![crate::ToolCall {
                id: "call_1".into(),
                name: "lookup_user".into(),
                arguments: r#"{"user_id":"u002"}"#.into()
            }]
        );
        assert_eq!(response.content, "");
        assert_eq!(record.usage, TokenUsage { prompt_tokens: 3, completion_tokens: 2 });
        assert_eq!(record.cost_usd, 5.0, "a tool-call reply is priced like any other");
        assert_eq!(record.attempts, 1);
        let seen = log.0.lock().unwrap().clone();
        assert_eq!(seen, vec![("investigate".to_owned(), vec!["lookup_user".to_owned()], 2, "")]);
    }

    #[tokio::test]
    async fn structured_helpers_refuse_a_reply_that_called_tools() {
        let model = Arc::new(ScriptedModel::new("s"));
        let log = Arc::new(SeenCalls::default());
        let client = LlmClient::new(model.clone()).with_call_log(log.clone());
        let schema =
            OutputSchema::new(serde_json::json!({"type": "object", "properties": {"team_id": {"type": "string"}}}));

        model.push_reply(ScriptedReply::tool_call("lookup_user", serde_json::json!({"user_id": "u002"})));
        let error = client
            .structured_with::<Pick>(offering_lookup("pick"), &schema, &CallOptions::default())
            .await
            .unwrap_err()
            .error;
        assert!(matches!(error, LlmError::Config { field: STRUCTURED_TOOL_CALLS, .. }), "{error}");
        assert!(error.to_string().contains("[\"lookup_user\"]"), "{error}");
        assert_eq!(model.requests().len(), 1, "no repair attempt: there is no content to repair");
        assert_eq!(log.0.lock().unwrap().len(), 1, "the call is still recorded");

        // Offering tools is fine when the model answers with content.
        model.push_reply(ScriptedReply::json(&serde_json::json!({"team_id": "ops"})));
        let (pick, _) =
            client.structured_with::<Pick>(offering_lookup("pick"), &schema, &CallOptions::default()).await.unwrap();
        assert_eq!(pick.team_id, "ops");

        // The repair reply is checked too.
        model.push_reply(ScriptedReply::text("not json"));
        model.push_reply(ScriptedReply::tool_call("lookup_user", serde_json::json!({})));
        let error = client
            .structured_checked(offering_lookup("pick"), &schema, &CallOptions::default(), |_: &Pick| Ok(()))
            .await
            .unwrap_err()
            .error;
        assert!(matches!(error, LlmError::Config { field: STRUCTURED_TOOL_CALLS, .. }), "{error}");
    }
}
