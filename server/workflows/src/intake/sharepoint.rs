//! Files each confirmed request as an item in the team's SharePoint list through Microsoft Graph.
//!
//! Authentication is the OAuth 2.0 client credentials grant against the Microsoft identity
//! platform (`{authority}/{tenant}/oauth2/v2.0/token`) with the `.default` scope of the Graph
//! origin. The app registration needs the `Sites.ReadWrite.All` application permission (or
//! `Sites.Selected` with write access granted on the site).
//!
//! Each submission becomes one `POST {graph}/sites/{site_id}/lists/{list_id}/items` with
//! `{"fields": {...}}`: `Title`, one column per collected field (named as the field), `Unknown`
//! for fields the user marked unknown, `FrontdeskSubmissionId` and `TeamId`. The list must
//! have those columns (internal names); Graph rejects unknown columns with a 400.
//!
//! Errors map onto [`SubmitError`]:
//! - no list configured for the team: [`SubmitError::NoTarget`];
//! - the token endpoint refuses the credentials (4xx), or Graph answers 401 again with a fresh
//!   token: [`SubmitError::Auth`];
//! - Graph refuses the item (4xx): [`SubmitError::Rejected`] with Graph's `error.message`;
//! - network failure, timeout, 5xx, 408/429 throttling, or an unreadable success body:
//!   [`SubmitError::Unavailable`].

use std::{collections::BTreeMap, fmt, path::PathBuf, time::Duration};

use async_trait::async_trait;
use reqwest::{StatusCode, Url};
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio::{sync::Mutex, time::Instant};

use super::submit::{Receipt, Submission, SubmitError, Submitter};

const DEFAULT_AUTHORITY_URL: &str = "https://login.microsoftonline.com";
const DEFAULT_GRAPH_URL: &str = "https://graph.microsoft.com/v1.0";
const DEFAULT_TIMEOUT_SECS: u64 = 30;
/// A cached token is replaced this long before the identity platform says it expires.
const TOKEN_EXPIRY_MARGIN: Duration = Duration::from_secs(60);
/// The value sent for fields the user marked as unknown.
const UNKNOWN_VALUE: &str = "Unknown";
/// Longest piece of a non-JSON error body quoted in an error message.
const MAX_QUOTED_BODY: usize = 300;

/// Where and how to file SharePoint list items. `Debug` redacts the client secret.
#[derive(Clone, Deserialize)]
pub struct SharePointConfig {
    /// Entra ID (Azure AD) tenant id or domain.
    pub tenant_id: String,
    /// Application (client) id of the app registration.
    pub client_id: String,
    /// Client secret of the app registration. Never logged or put in an error. Leave it unset
    /// when `client_secret_file` holds it.
    #[serde(default)]
    pub client_secret: String,
    /// A file holding the client secret (its content, surrounding whitespace trimmed), such as
    /// a mounted secret; read when the submitter is built. Setting both is an error.
    #[serde(default)]
    pub client_secret_file: Option<PathBuf>,
    /// Graph site id, e.g. `contoso.sharepoint.com,{site-collection-guid},{web-guid}`.
    pub site_id: String,
    /// team_id -> list id (GUID or list name).
    pub team_lists: BTreeMap<String, String>,
    /// Default `https://login.microsoftonline.com`; overridable for tests and sovereign clouds.
    #[serde(default)]
    pub authority_url: Option<String>,
    /// Default `https://graph.microsoft.com/v1.0`. The token scope is this URL's origin plus
    /// `/.default` (`https://graph.microsoft.com/.default` by default; a national cloud's Graph
    /// gets its own scope, and a local test server gets e.g. `http://127.0.0.1:8080/.default`).
    #[serde(default)]
    pub graph_url: Option<String>,
    /// Per-request timeout (token and Graph calls each). Default 30.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

impl fmt::Debug for SharePointConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharePointConfig")
            .field("tenant_id", &self.tenant_id)
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .field("client_secret_file", &self.client_secret_file)
            .field("site_id", &self.site_id)
            .field("team_lists", &self.team_lists)
            .field("authority_url", &self.authority_url)
            .field("graph_url", &self.graph_url)
            .field("timeout_secs", &self.timeout_secs)
            .finish()
    }
}

/// A [`Submitter`] that creates one SharePoint list item per submission, in the list configured
/// for the submission's team. Access tokens are cached and shared by concurrent submissions.
pub struct SharePointSubmitter {
    http: reqwest::Client,
    tenant_id: String,
    client_id: String,
    client_secret: String,
    token_url: Url,
    scope: String,
    /// team_id -> (list id, items endpoint).
    team_items: BTreeMap<String, (String, Url)>,
    /// Held while a token is fetched, so concurrent submissions share one token request.
    token: Mutex<Option<CachedToken>>,
}

impl fmt::Debug for SharePointSubmitter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharePointSubmitter")
            .field("tenant_id", &self.tenant_id)
            .field("client_id", &self.client_id)
            .field("token_url", &self.token_url.as_str())
            .field("scope", &self.scope)
            .field("teams", &self.team_items.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

struct CachedToken {
    value: String,
    /// When to stop using it: `expires_in` minus [`TOKEN_EXPIRY_MARGIN`].
    refresh_at: Instant,
}

/// Why the service could not be used, as the source of [`SubmitError::Unavailable`].
#[derive(Debug, thiserror::Error)]
enum ServiceError {
    #[error("invalid sharepoint configuration: {0}")]
    Config(String),
    #[error("{service} returned {status}: {message}")]
    Status { service: &'static str, status: u16, message: String },
    #[error("{service} returned an unreadable response: {message}")]
    Malformed { service: &'static str, message: String },
}

/// `client_secret`, or the trimmed content of `client_secret_file`. An error names the setting
/// and the file, never the content.
fn read_client_secret(config: &SharePointConfig) -> Result<String, SubmitError> {
    let Some(path) = &config.client_secret_file else { return Ok(config.client_secret.clone()) };
    if !config.client_secret.is_empty() {
        return Err(config_error("client_secret and client_secret_file are both set; set only one"));
    }
    let content = std::fs::read_to_string(path)
        .map_err(|e| config_error(format!("cannot read client_secret_file {}: {e}", path.display())))?;
    let secret = content.trim();
    if secret.is_empty() {
        return Err(config_error(format!("client_secret_file {} is empty", path.display())));
    }
    Ok(secret.to_owned())
}

fn unavailable(error: impl std::error::Error + Send + Sync + 'static) -> SubmitError {
    SubmitError::Unavailable(Box::new(error))
}

fn config_error(message: impl Into<String>) -> SubmitError {
    unavailable(ServiceError::Config(message.into()))
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    /// Seconds; a number from the v2.0 endpoint, a string from some older ones.
    expires_in: Option<Seconds>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Seconds {
    Number(u64),
    Text(String),
}

impl Seconds {
    fn get(&self) -> Option<u64> {
        match self {
            Seconds::Number(n) => Some(*n),
            Seconds::Text(s) => s.trim().parse().ok(),
        }
    }
}

#[derive(Deserialize)]
struct TokenErrorBody {
    error: Option<String>,
    error_description: Option<String>,
}

#[derive(Deserialize)]
struct GraphErrorBody {
    error: GraphError,
}

#[derive(Deserialize)]
struct GraphError {
    code: Option<String>,
    message: Option<String>,
}

#[derive(Deserialize)]
struct CreatedItem {
    id: String,
    #[serde(rename = "webUrl")]
    web_url: String,
}

/// The outcome of one item creation attempt that did not succeed.
enum CreateFailure {
    /// Graph refused the token; worth one retry with a fresh one.
    Unauthorized(String),
    Other(SubmitError),
}

impl SharePointSubmitter {
    /// Validates the configuration and builds the HTTP client. Fails with
    /// [`SubmitError::Unavailable`] (whose source says what is wrong) if a URL is invalid or a
    /// required value is empty.
    pub fn new(config: SharePointConfig) -> Result<Self, SubmitError> {
        let client_secret = read_client_secret(&config)?;
        for (name, value) in [
            ("tenant_id", &config.tenant_id),
            ("client_id", &config.client_id),
            ("client_secret", &client_secret),
            ("site_id", &config.site_id),
        ] {
            if value.trim().is_empty() {
                return Err(config_error(format!("{name} is empty")));
            }
        }

        let authority = parse_base_url("authority_url", config.authority_url.as_deref(), DEFAULT_AUTHORITY_URL)?;
        let graph = parse_base_url("graph_url", config.graph_url.as_deref(), DEFAULT_GRAPH_URL)?;
        let token_url = join(&authority, &[&config.tenant_id, "oauth2", "v2.0", "token"]);
        let scope = format!("{}/.default", graph.origin().ascii_serialization());

        let mut team_items = BTreeMap::new();
        for (team_id, list_id) in &config.team_lists {
            if list_id.trim().is_empty() {
                return Err(config_error(format!("the list id of team {team_id} is empty")));
            }
            let url = join(&graph, &["sites", &config.site_id, "lists", list_id, "items"]);
            team_items.insert(team_id.clone(), (list_id.clone(), url));
        }

        let timeout = Duration::from_secs(config.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS).max(1));
        let http = reqwest::Client::builder().timeout(timeout).build().map_err(unavailable)?;

        tracing::debug!(
            token_url = %token_url,
            scope = %scope,
            site_id = %config.site_id,
            teams = team_items.len(),
            timeout_secs = timeout.as_secs(),
            "sharepoint submitter configured"
        );
        Ok(SharePointSubmitter {
            http,
            tenant_id: config.tenant_id,
            client_id: config.client_id,
            client_secret,
            token_url,
            scope,
            team_items,
            token: Mutex::new(None),
        })
    }

    /// A valid access token, from the cache or freshly requested.
    async fn access_token(&self) -> Result<String, SubmitError> {
        let mut cached = self.token.lock().await;
        if let Some(token) = cached.as_ref() {
            if Instant::now() < token.refresh_at {
                return Ok(token.value.clone());
            }
            tracing::debug!("graph access token expired; refreshing");
        }
        let fresh = self.request_token().await?;
        let value = fresh.value.clone();
        *cached = Some(fresh);
        Ok(value)
    }

    /// Drops the cached token if it is still the one Graph refused.
    async fn invalidate(&self, refused: &str) {
        let mut cached = self.token.lock().await;
        if cached.as_ref().is_some_and(|t| t.value == refused) {
            *cached = None;
        }
    }

    async fn request_token(&self) -> Result<CachedToken, SubmitError> {
        let form = [
            ("grant_type", "client_credentials"),
            ("client_id", self.client_id.as_str()),
            ("client_secret", self.client_secret.as_str()),
            ("scope", self.scope.as_str()),
        ];
        let response = self.http.post(self.token_url.clone()).form(&form).send().await.map_err(|e| {
            tracing::warn!(tenant_id = %self.tenant_id, error = %e, "token request failed");
            unavailable(e)
        })?;
        let status = response.status();
        let body = response.text().await.map_err(unavailable)?;

        if status.is_success() {
            let parsed: TokenResponse = serde_json::from_str(&body).map_err(|e| {
                unavailable(ServiceError::Malformed { service: "token endpoint", message: e.to_string() })
            })?;
            let expires_in = parsed.expires_in.as_ref().and_then(Seconds::get).unwrap_or(0);
            let lifetime = Duration::from_secs(expires_in).saturating_sub(TOKEN_EXPIRY_MARGIN);
            tracing::debug!(tenant_id = %self.tenant_id, expires_in, "fetched graph access token");
            return Ok(CachedToken { value: parsed.access_token, refresh_at: Instant::now() + lifetime });
        }

        let message = self.redact(&token_error_message(status, &body));
        if status.is_client_error() && !is_throttling(status) {
            tracing::warn!(tenant_id = %self.tenant_id, status = status.as_u16(), message = %message, "token request refused");
            return Err(SubmitError::Auth(message));
        }
        tracing::warn!(tenant_id = %self.tenant_id, status = status.as_u16(), message = %message, "token endpoint failed");
        Err(unavailable(ServiceError::Status { service: "token endpoint", status: status.as_u16(), message }))
    }

    async fn create_item(&self, url: &Url, body: &Value, token: &str) -> Result<CreatedItem, CreateFailure> {
        let response = self.http.post(url.clone()).bearer_auth(token).json(body).send().await.map_err(|e| {
            tracing::warn!(error = %e, "graph request failed");
            CreateFailure::Other(unavailable(e))
        })?;
        let status = response.status();
        let text = response.text().await.map_err(|e| CreateFailure::Other(unavailable(e)))?;

        if status.is_success() {
            return serde_json::from_str(&text).map_err(|e| {
                CreateFailure::Other(unavailable(ServiceError::Malformed { service: "graph", message: e.to_string() }))
            });
        }
        let (code, message) = graph_error_message(status, &text);
        tracing::warn!(status = status.as_u16(), code = code.as_deref().unwrap_or(""), message = %message, "graph refused the list item");
        if status == StatusCode::UNAUTHORIZED {
            Err(CreateFailure::Unauthorized(message))
        } else if status.is_client_error() && !is_throttling(status) {
            Err(CreateFailure::Other(SubmitError::Rejected { status: status.as_u16(), message }))
        } else {
            Err(CreateFailure::Other(unavailable(ServiceError::Status {
                service: "graph",
                status: status.as_u16(),
                message,
            })))
        }
    }

    /// Removes the client secret from text that came back from a server, in case it echoes it.
    fn redact(&self, text: &str) -> String {
        text.replace(&self.client_secret, "<redacted>")
    }
}

#[async_trait]
impl Submitter for SharePointSubmitter {
    async fn submit(&self, submission: &Submission) -> Result<Receipt, SubmitError> {
        let Some((list_id, url)) = self.team_items.get(&submission.team_id) else {
            tracing::warn!(submission_id = %submission.id, team_id = %submission.team_id, "no sharepoint list configured for team");
            return Err(SubmitError::NoTarget { team_id: submission.team_id.clone() });
        };
        let body = item_body(submission);

        let token = self.access_token().await?;
        let created = match self.create_item(url, &body, &token).await {
            Ok(created) => created,
            Err(CreateFailure::Other(error)) => return Err(error),
            Err(CreateFailure::Unauthorized(_)) => {
                tracing::info!(submission_id = %submission.id, "graph refused the access token; retrying with a fresh one");
                self.invalidate(&token).await;
                let token = self.access_token().await?;
                match self.create_item(url, &body, &token).await {
                    Ok(created) => created,
                    Err(CreateFailure::Other(error)) => return Err(error),
                    Err(CreateFailure::Unauthorized(message)) => {
                        return Err(SubmitError::Auth(format!("graph refused a fresh access token: {message}")))
                    }
                }
            }
        };

        tracing::info!(
            submission_id = %submission.id,
            team_id = %submission.team_id,
            list_id = %list_id,
            item_id = %created.id,
            "sharepoint list item created"
        );
        Ok(Receipt { id: created.id, url: created.web_url })
    }
}

/// `{"fields": {...}}` for a submission. The `title` field becomes `Title` (and is not sent
/// again under its own name); a collected value wins over an "unknown" mark for the same field;
/// `FrontdeskSubmissionId` and `TeamId` are always the submission's.
fn item_body(submission: &Submission) -> Value {
    let mut fields = Map::new();
    let title = submission.fields.get("title").cloned().unwrap_or_else(|| format!("Request {}", submission.id));
    fields.insert("Title".to_owned(), Value::String(title));
    for (name, value) in &submission.fields {
        if name != "title" {
            fields.insert(name.clone(), Value::String(value.clone()));
        }
    }
    for name in &submission.unknown {
        if name != "title" && !submission.fields.contains_key(name) {
            fields.insert(name.clone(), Value::String(UNKNOWN_VALUE.to_owned()));
        }
    }
    fields.insert("FrontdeskSubmissionId".to_owned(), Value::String(submission.id.clone()));
    fields.insert("TeamId".to_owned(), Value::String(submission.team_id.clone()));
    let mut body = Map::new();
    body.insert("fields".to_owned(), Value::Object(fields));
    Value::Object(body)
}

fn parse_base_url(name: &str, value: Option<&str>, default: &str) -> Result<Url, SubmitError> {
    let raw = value.map(str::trim).filter(|v| !v.is_empty()).unwrap_or(default);
    let url = Url::parse(raw).map_err(|e| config_error(format!("{name} {raw:?} is not a valid URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(config_error(format!("{name} {raw:?} must be an http(s) URL with a host")));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(config_error(format!("{name} {raw:?} must not have a query or fragment")));
    }
    Ok(url)
}

/// `base` with `segments` appended as path segments (each percent-encoded as needed).
fn join(base: &Url, segments: &[&str]) -> Url {
    let mut url = base.clone();
    if let Ok(mut path) = url.path_segments_mut() {
        path.pop_if_empty().extend(segments);
    }
    url
}

/// 408 and 429 ask the caller to come back later: the item itself may be fine.
fn is_throttling(status: StatusCode) -> bool {
    status == StatusCode::REQUEST_TIMEOUT || status == StatusCode::TOO_MANY_REQUESTS
}

fn token_error_message(status: StatusCode, body: &str) -> String {
    match serde_json::from_str::<TokenErrorBody>(body) {
        Ok(TokenErrorBody { error_description: Some(description), .. }) if !description.trim().is_empty() => {
            description.trim().to_owned()
        }
        Ok(TokenErrorBody { error: Some(error), .. }) if !error.trim().is_empty() => error.trim().to_owned(),
        _ => fallback_message(status, body),
    }
}

/// Graph's `error.code` (if any) and a message: `error.message`, or what the body allows.
fn graph_error_message(status: StatusCode, body: &str) -> (Option<String>, String) {
    match serde_json::from_str::<GraphErrorBody>(body) {
        Ok(GraphErrorBody { error }) => {
            let message = error
                .message
                .filter(|m| !m.trim().is_empty())
                .or_else(|| error.code.clone())
                .unwrap_or_else(|| fallback_message(status, ""));
            (error.code, message)
        }
        Err(_) => (None, fallback_message(status, body)),
    }
}

fn fallback_message(status: StatusCode, body: &str) -> String {
    let body = body.trim();
    if body.is_empty() {
        return status.canonical_reason().unwrap_or("no details").to_owned();
    }
    match body.char_indices().nth(MAX_QUOTED_BODY) {
        Some((cut, _)) => format!("{}…", &body[..cut]),
        None => body.to_owned(),
    }
}
