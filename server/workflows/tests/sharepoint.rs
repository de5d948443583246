//! SharePointSubmitter against a local axum server playing both the Microsoft identity platform
//! token endpoint and the Graph list-items endpoint.

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    extract::{Form, Path, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
    Json, Router,
};
use frontdesk_workflows::intake::{
    sharepoint::{SharePointConfig, SharePointSubmitter},
    Submission, SubmitError, Submitter,
};
use serde_json::{json, Value};

const TENANT: &str = "tenant-123";
const CLIENT_ID: &str = "client-abc";
const SECRET: &str = "s3cr3t-Value~0123456789";
const SITE: &str = "contoso.sharepoint.com,11111111-aaaa,22222222-bbbb";
const LIST: &str = "list-guid-ops";

#[derive(Debug, Clone)]
struct ItemRequest {
    site: String,
    list: String,
    authorization: Option<String>,
    body: Value,
}

#[derive(Default)]
struct MockState {
    token_requests: Vec<(String, HashMap<String, String>)>,
    item_requests: Vec<ItemRequest>,
    /// Replies for the next token requests; empty means issue `token-N`.
    token_replies: VecDeque<(StatusCode, Value)>,
    /// `expires_in` of issued tokens.
    expires_in: u64,
    /// Replies for the next item requests; empty means 201 with a created item.
    item_replies: VecDeque<(StatusCode, Value)>,
    /// Delay before answering item requests.
    item_delay: Option<Duration>,
    issued: u32,
}

#[derive(Clone)]
struct Mock {
    state: Arc<Mutex<MockState>>,
    base: String,
}

impl Mock {
    async fn start() -> Mock {
        let state = Arc::new(Mutex::new(MockState { expires_in: 3599, ..Default::default() }));
        let app = Router::new()
            .route("/{tenant}/oauth2/v2.0/token", post(token))
            .route("/v1.0/sites/{site}/lists/{list}/items", post(create_item))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
        Mock { state, base: format!("http://{addr}") }
    }

    fn config(&self) -> SharePointConfig {
        SharePointConfig {
            tenant_id: TENANT.to_owned(),
            client_id: CLIENT_ID.to_owned(),
            client_secret: SECRET.to_owned(),
            client_secret_file: None,
            site_id: SITE.to_owned(),
            team_lists: BTreeMap::from([("ops".to_owned(), LIST.to_owned())]),
            authority_url: Some(self.base.clone()),
            graph_url: Some(format!("{}/v1.0", self.base)),
            timeout_secs: Some(5),
        }
    }

    fn submitter(&self) -> SharePointSubmitter {
        SharePointSubmitter::new(self.config()).expect("submitter")
    }

    fn state(&self) -> std::sync::MutexGuard<'_, MockState> {
        self.state.lock().unwrap()
    }

    fn token_hits(&self) -> usize {
        self.state().token_requests.len()
    }

    fn items(&self) -> Vec<ItemRequest> {
        self.state().item_requests.clone()
    }
}

async fn token(
    State(state): State<Arc<Mutex<MockState>>>,
    Path(tenant): Path<String>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let mut s = state.lock().unwrap();
    s.token_requests.push((tenant, form));
    if let Some((status, body)) = s.token_replies.pop_front() {
        return (status, Json(body)).into_response();
    }
    s.issued += 1;
    let body = json!({
        "token_type": "Bearer",
        "expires_in": s.expires_in,
        "ext_expires_in": s.expires_in,
        "access_token": format!("token-{}", s.issued),
    });
    Json(body).into_response()
}

async fn create_item(
    State(state): State<Arc<Mutex<MockState>>>,
    Path((site, list)): Path<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let (reply, delay) = {
        let mut s = state.lock().unwrap();
        let authorization = headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned);
        s.item_requests.push(ItemRequest { site, list: list.clone(), authorization, body });
        let n = s.item_requests.len();
        let reply = s.item_replies.pop_front().unwrap_or_else(|| {
            (
                StatusCode::CREATED,
                json!({
                    "id": n.to_string(),
                    "webUrl": format!("https://contoso.sharepoint.com/sites/frontdesk/Lists/{list}/DispForm.aspx?ID={n}"),
                    "fields": {},
                }),
            )
        });
        (reply, s.item_delay)
    };
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    (reply.0, Json(reply.1)).into_response()
}

fn submission(team: &str) -> Submission {
    Submission {
        id: "sub-42".to_owned(),
        thread_id: "thread-7".to_owned(),
        team_id: team.to_owned(),
        team_name: "Operations".to_owned(),
        fields: BTreeMap::from([
            ("title".to_owned(), "New VPN access".to_owned()),
            ("description".to_owned(), "Contractor needs VPN".to_owned()),
        ]),
        unknown: vec!["budget".to_owned()],
        labels: vec![
            ("title".to_owned(), "Title".to_owned()),
            ("description".to_owned(), "Description".to_owned()),
            ("budget".to_owned(), "Budget".to_owned()),
        ],
    }
}

fn graph_error(code: &str, message: &str) -> Value {
    json!({"error": {"code": code, "message": message, "innerError": {"request-id": "r-1"}}})
}

#[tokio::test]
async fn happy_path_requests_a_token_and_creates_the_item() {
    let mock = Mock::start().await;
    let receipt = mock.submitter().submit(&submission("ops")).await.expect("submitted");

    let s = mock.state();
    assert_eq!(s.token_requests.len(), 1);
    let (tenant, form) = &s.token_requests[0];
    assert_eq!(tenant, TENANT);
    assert_eq!(form.get("grant_type").map(String::as_str), Some("client_credentials"));
    assert_eq!(form.get("client_id").map(String::as_str), Some(CLIENT_ID));
    assert_eq!(form.get("client_secret").map(String::as_str), Some(SECRET));
    assert_eq!(form.get("scope"), Some(&format!("{}/.default", mock.base)));
    assert_eq!(form.len(), 4);

    assert_eq!(s.item_requests.len(), 1);
    let item = &s.item_requests[0];
    assert_eq!(item.site, SITE);
    assert_eq!(item.list, LIST);
    assert_eq!(item.authorization.as_deref(), Some("Bearer token-1"));
    assert_eq!(
        item.body,
        json!({"fields": {
            "Title": "New VPN access",
            "description": "Contractor needs VPN",
            "budget": "Unknown",
            "FrontdeskSubmissionId": "sub-42",
            "TeamId": "ops",
        }})
    );

    assert_eq!(receipt.id, "1");
    assert_eq!(receipt.url, format!("https://contoso.sharepoint.com/sites/frontdesk/Lists/{LIST}/DispForm.aspx?ID=1"));
}

#[tokio::test]
async fn title_defaults_to_the_submission_id() {
    let mock = Mock::start().await;
    let mut sub = submission("ops");
    sub.fields.remove("title");
    mock.submitter().submit(&sub).await.expect("submitted");
    assert_eq!(mock.items()[0].body["fields"]["Title"], "Request sub-42");
}

#[tokio::test]
async fn default_scope_is_graph_dot_default() {
    // Only the scope derivation is checked here: the default Graph URL is never contacted.
    let mock = Mock::start().await;
    let config = SharePointConfig { graph_url: None, ..mock.config() };
    let submitter = SharePointSubmitter::new(config).expect("submitter");
    assert!(format!("{submitter:?}").contains("https://graph.microsoft.com/.default"));
}

#[tokio::test]
async fn token_is_cached_across_submissions() {
    let mock = Mock::start().await;
    let submitter = mock.submitter();
    let first = submitter.submit(&submission("ops")).await.expect("first");
    let second = submitter.submit(&submission("ops")).await.expect("second");
    assert_ne!(first.id, second.id);
    assert_eq!(mock.token_hits(), 1);
    let items = mock.items();
    assert_eq!(items.len(), 2);
    assert!(items.iter().all(|i| i.authorization.as_deref() == Some("Bearer token-1")));
}

#[tokio::test]
async fn token_about_to_expire_is_refreshed() {
    let mock = Mock::start().await;
    // Within the 60 s safety margin: never reused.
    mock.state().expires_in = 60;
    let submitter = mock.submitter();
    submitter.submit(&submission("ops")).await.expect("first");
    submitter.submit(&submission("ops")).await.expect("second");
    assert_eq!(mock.token_hits(), 2);
    let auth: Vec<_> = mock.items().into_iter().map(|i| i.authorization.unwrap()).collect();
    assert_eq!(auth, ["Bearer token-1", "Bearer token-2"]);
}

#[tokio::test]
async fn graph_401_refreshes_the_token_and_retries_once() {
    let mock = Mock::start().await;
    mock.state()
        .item_replies
        .push_back((StatusCode::UNAUTHORIZED, graph_error("InvalidAuthenticationToken", "Access token has expired.")));
    let receipt = mock.submitter().submit(&submission("ops")).await.expect("submitted after refresh");

    assert_eq!(mock.token_hits(), 2);
    let items = mock.items();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0].authorization.as_deref(), Some("Bearer token-1"));
    assert_eq!(items[1].authorization.as_deref(), Some("Bearer token-2"));
    assert_eq!(items[0].body, items[1].body);
    assert_eq!(receipt.id, "2");
}

#[tokio::test]
async fn graph_401_twice_is_auth() {
    let mock = Mock::start().await;
    for _ in 0..2 {
        mock.state()
            .item_replies
            .push_back((StatusCode::UNAUTHORIZED, graph_error("InvalidAuthenticationToken", "Token is not valid.")));
    }
    let err = mock.submitter().submit(&submission("ops")).await.expect_err("auth error");
    match err {
        SubmitError::Auth(message) => assert!(message.contains("Token is not valid."), "{message}"),
        other => panic!("expected Auth, got {other:?}"),
    }
    assert_eq!(mock.token_hits(), 2);
    assert_eq!(mock.items().len(), 2);
}

#[tokio::test]
async fn unknown_team_is_no_target() {
    let mock = Mock::start().await;
    let err = mock.submitter().submit(&submission("legal")).await.expect_err("no target");
    assert!(matches!(err, SubmitError::NoTarget { ref team_id } if team_id == "legal"), "{err:?}");
    assert_eq!(mock.token_hits(), 0);
    assert!(mock.items().is_empty());
}

#[tokio::test]
async fn token_rejection_is_auth_without_the_secret() {
    let mock = Mock::start().await;
    // A server that echoes the secret must not get it into the error.
    mock.state().token_replies.push_back((
        StatusCode::UNAUTHORIZED,
        json!({
            "error": "invalid_client",
            "error_description": format!("AADSTS7000215: Invalid client secret provided: {SECRET}"),
            "error_codes": [7000215],
        }),
    ));
    let err = mock.submitter().submit(&submission("ops")).await.expect_err("auth error");
    let SubmitError::Auth(message) = &err else { panic!("expected Auth, got {err:?}") };
    assert!(message.contains("AADSTS7000215"), "{message}");
    assert!(!message.contains(SECRET), "{message}");
    assert!(!err.to_string().contains(SECRET));
    assert!(!format!("{err:?}").contains(SECRET));
    assert!(mock.items().is_empty());
}

#[tokio::test]
async fn token_400_is_auth_with_the_description() {
    let mock = Mock::start().await;
    mock.state().token_replies.push_back((
        StatusCode::BAD_REQUEST,
        json!({"error": "invalid_request", "error_description": "AADSTS90002: Tenant 'tenant-123' not found."}),
    ));
    let err = mock.submitter().submit(&submission("ops")).await.expect_err("auth error");
    assert!(matches!(&err, SubmitError::Auth(m) if m == "AADSTS90002: Tenant 'tenant-123' not found."), "{err:?}");
}

#[tokio::test]
async fn token_endpoint_5xx_is_unavailable() {
    let mock = Mock::start().await;
    mock.state().token_replies.push_back((StatusCode::SERVICE_UNAVAILABLE, json!({})));
    let err = mock.submitter().submit(&submission("ops")).await.expect_err("unavailable");
    assert!(matches!(err, SubmitError::Unavailable(_)), "{err:?}");
}

#[tokio::test]
async fn graph_400_is_rejected_with_the_graph_message() {
    let mock = Mock::start().await;
    mock.state()
        .item_replies
        .push_back((StatusCode::BAD_REQUEST, graph_error("invalidRequest", "Field 'budget' is not recognized")));
    let err = mock.submitter().submit(&submission("ops")).await.expect_err("rejected");
    match err {
        SubmitError::Rejected { status, message } => {
            assert_eq!(status, 400);
            assert_eq!(message, "Field 'budget' is not recognized");
        }
        other => panic!("expected Rejected, got {other:?}"),
    }
    assert_eq!(mock.token_hits(), 1);
    assert_eq!(mock.items().len(), 1);
}

#[tokio::test]
async fn graph_503_is_unavailable() {
    let mock = Mock::start().await;
    mock.state()
        .item_replies
        .push_back((StatusCode::SERVICE_UNAVAILABLE, graph_error("serviceNotAvailable", "Try again later")));
    let err = mock.submitter().submit(&submission("ops")).await.expect_err("unavailable");
    let SubmitError::Unavailable(source) = &err else { panic!("expected Unavailable, got {err:?}") };
    assert!(source.to_string().contains("503"), "{source}");
    assert_eq!(mock.items().len(), 1);
}

#[tokio::test]
async fn graph_429_is_unavailable() {
    let mock = Mock::start().await;
    mock.state()
        .item_replies
        .push_back((StatusCode::TOO_MANY_REQUESTS, graph_error("activityLimitReached", "Throttled")));
    let err = mock.submitter().submit(&submission("ops")).await.expect_err("unavailable");
    assert!(matches!(err, SubmitError::Unavailable(_)), "{err:?}");
}

#[tokio::test]
async fn graph_timeout_is_unavailable() {
    let mock = Mock::start().await;
    mock.state().item_delay = Some(Duration::from_secs(3));
    let config = SharePointConfig { timeout_secs: Some(1), ..mock.config() };
    let submitter = SharePointSubmitter::new(config).expect("submitter");
    let err = submitter.submit(&submission("ops")).await.expect_err("timeout");
    assert!(matches!(err, SubmitError::Unavailable(_)), "{err:?}");
}

#[tokio::test]
async fn unreachable_service_is_unavailable() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let config = SharePointConfig {
        tenant_id: TENANT.to_owned(),
        client_id: CLIENT_ID.to_owned(),
        client_secret: SECRET.to_owned(),
        client_secret_file: None,
        site_id: SITE.to_owned(),
        team_lists: BTreeMap::from([("ops".to_owned(), LIST.to_owned())]),
        authority_url: Some(format!("http://{addr}")),
        graph_url: Some(format!("http://{addr}/v1.0")),
        timeout_secs: Some(5),
    };
    let err = SharePointSubmitter::new(config).expect("submitter").submit(&submission("ops")).await.expect_err("down");
    assert!(matches!(err, SubmitError::Unavailable(_)), "{err:?}");
}

#[tokio::test]
async fn debug_output_redacts_the_secret() {
    let mock = Mock::start().await;
    let config = mock.config();
    let debug = format!("{config:?}");
    assert!(!debug.contains(SECRET), "{debug}");
    assert!(debug.contains("<redacted>") && debug.contains(CLIENT_ID), "{debug}");
    let submitter = SharePointSubmitter::new(config).expect("submitter");
    submitter.submit(&submission("ops")).await.expect("submitted");
    let debug = format!("{submitter:?}");
    assert!(!debug.contains(SECRET) && !debug.contains("token-1"), "{debug}");
}

#[test]
fn config_deserializes_with_defaults() {
    let config: SharePointConfig = serde_json::from_value(json!({
        "tenant_id": TENANT,
        "client_id": CLIENT_ID,
        "client_secret": SECRET,
        "site_id": SITE,
        "team_lists": {"ops": LIST, "legal": "list-guid-legal"},
    }))
    .expect("config");
    assert_eq!(config.team_lists.len(), 2);
    assert_eq!(config.authority_url, None);
    assert_eq!(config.graph_url, None);
    assert_eq!(config.timeout_secs, None);
    SharePointSubmitter::new(config).expect("defaults are valid");
}

#[test]
fn invalid_configuration_is_refused() {
    let base = SharePointConfig {
        tenant_id: TENANT.to_owned(),
        client_id: CLIENT_ID.to_owned(),
        client_secret: SECRET.to_owned(),
        client_secret_file: None,
        site_id: SITE.to_owned(),
        team_lists: BTreeMap::new(),
        authority_url: None,
        graph_url: None,
        timeout_secs: None,
    };
    let bad = [
        SharePointConfig { graph_url: Some("not a url".to_owned()), ..base.clone() },
        SharePointConfig { authority_url: Some("ftp://login.example".to_owned()), ..base.clone() },
        SharePointConfig { client_secret: String::new(), ..base.clone() },
        SharePointConfig { team_lists: BTreeMap::from([("ops".to_owned(), " ".to_owned())]), ..base.clone() },
    ];
    for config in bad {
        let err = SharePointSubmitter::new(config).expect_err("invalid");
        assert!(matches!(err, SubmitError::Unavailable(_)), "{err:?}");
        assert!(!format!("{err:?}").contains(SECRET));
    }
}

/// A file of the test's own under the system's temp directory, removed on drop.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(name: &str, content: &str) -> TempFile {
        let path = std::env::temp_dir().join(format!("frontdesk-sharepoint-{}-{name}", std::process::id()));
        std::fs::write(&path, content).expect("temp file");
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[tokio::test]
async fn the_client_secret_can_come_from_a_file() {
    let mock = Mock::start().await;
    let file = TempFile::new("secret", &format!("  {SECRET}\n"));
    let config: SharePointConfig = serde_json::from_value(json!({
        "tenant_id": TENANT,
        "client_id": CLIENT_ID,
        "client_secret_file": file.0,
        "site_id": SITE,
        "team_lists": {"ops": LIST},
        "authority_url": mock.base,
        "graph_url": format!("{}/v1.0", mock.base),
    }))
    .expect("config");
    assert!(!format!("{config:?}").contains(SECRET));
    let submitter = SharePointSubmitter::new(config).expect("submitter");
    submitter.submit(&submission("ops")).await.expect("submitted");
    let s = mock.state();
    assert_eq!(s.token_requests[0].1.get("client_secret").map(String::as_str), Some(SECRET), "trimmed");
}

#[test]
fn a_missing_empty_or_doubled_client_secret_file_is_refused() {
    let empty = TempFile::new("empty", " \n");
    let full = TempFile::new("full", SECRET);
    let base = SharePointConfig {
        tenant_id: TENANT.to_owned(),
        client_id: CLIENT_ID.to_owned(),
        client_secret: String::new(),
        client_secret_file: None,
        site_id: SITE.to_owned(),
        team_lists: BTreeMap::new(),
        authority_url: None,
        graph_url: None,
        timeout_secs: None,
    };
    let missing = std::env::temp_dir().join("frontdesk-sharepoint-no-such-file");
    for (config, expected) in [
        (SharePointConfig { client_secret_file: Some(missing), ..base.clone() }, "cannot read client_secret_file"),
        (SharePointConfig { client_secret_file: Some(empty.0.clone()), ..base.clone() }, "is empty"),
        (
            SharePointConfig {
                client_secret: "other".into(),
                client_secret_file: Some(full.0.clone()),
                ..base.clone()
            },
            "client_secret and client_secret_file are both set",
        ),
        (base.clone(), "client_secret is empty"),
    ] {
        let err = SharePointSubmitter::new(config).expect_err("invalid");
        let SubmitError::Unavailable(source) = &err else { panic!("{err:?}") };
        let message = source.to_string();
        assert!(message.contains(expected), "{message}");
        assert!(!message.contains(SECRET), "{message}");
    }
}
