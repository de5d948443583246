//! The client and the `frontdesk` CLI against an in-process mock server.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::process::Stdio;
use std::time::Duration;

use frontdesk_client::{v1, Client, ClientError, SendOptions, StartOptions, TurnEvent};
use futures::{Stream, StreamExt};
use tokio::io::AsyncWriteExt;
use tonic::{Code, Request, Response, Status};
use tonic_types::{ErrorDetails, StatusExt};
use v1::conversation_service_server::{ConversationService, ConversationServiceServer};
use v1::run_event::Kind;
use v1::workflow_service_server::{WorkflowService, WorkflowServiceServer};

struct Mock;

fn conversation(id: &str, mode: v1::IntakeMode) -> v1::Conversation {
    let mut fields = HashMap::new();
    fields.insert("title".to_string(), "New laptop".to_string());
    v1::Conversation {
        conversation_id: id.to_string(),
        workflow: "intake".to_string(),
        turn_count: 1,
        version: 4,
        state: Some(v1::conversation::State::Intake(v1::IntakeState {
            mode: mode as i32,
            collected_fields: fields,
            missing_fields: vec!["budget".to_string()],
            ..Default::default()
        })),
        ..Default::default()
    }
}

fn assistant(text: &str) -> v1::Message {
    v1::Message {
        role: v1::Role::Assistant as i32,
        text: text.to_string(),
        node: "chat_agent".into(),
        ..Default::default()
    }
}

fn event(id: u64, node: &str, kind: Kind) -> Result<v1::SendMessageResponse, Status> {
    let e = v1::RunEvent {
        run_id: "run-1".into(),
        event_id: id,
        time: None,
        node: node.into(),
        task: None,
        kind: Some(kind),
    };
    Ok(v1::SendMessageResponse { payload: Some(v1::send_message_response::Payload::Event(e)) })
}

fn not_found(what: &str) -> Status {
    Status::with_error_details(
        Code::NotFound,
        format!("{what} not found"),
        ErrorDetails::with_error_info("NOT_FOUND", "frontdesk.dev", HashMap::new()),
    )
}

type EventStream = Pin<Box<dyn Stream<Item = Result<v1::SendMessageResponse, Status>> + Send>>;

#[tonic::async_trait]
impl ConversationService for Mock {
    async fn start_conversation(
        &self,
        request: Request<v1::StartConversationRequest>,
    ) -> Result<Response<v1::StartConversationResponse>, Status> {
        let req = request.into_inner();
        let id = if req.conversation_id.is_empty() { "c-1".to_string() } else { req.conversation_id };
        Ok(Response::new(v1::StartConversationResponse {
            conversation: Some(conversation(&id, v1::IntakeMode::Chat)),
            welcome: Some(assistant("Welcome! How can I help?")),
        }))
    }

    type SendMessageStream = EventStream;

    async fn send_message(&self, request: Request<v1::SendMessageRequest>) -> Result<Response<EventStream>, Status> {
        let req = request.into_inner();
        if req.text.is_empty() {
            let mut details = ErrorDetails::with_bad_request_violation("text", "must be non-empty");
            details.set_error_info("INVALID_ARGUMENT", "frontdesk.dev", HashMap::new());
            return Err(Status::with_error_details(Code::InvalidArgument, "invalid request", details));
        }
        let started = Kind::RunStarted(v1::RunStarted {
            thread_id: req.conversation_id.clone(),
            workflow: "intake".into(),
            resumed: false,
        });
        let items: Vec<Result<v1::SendMessageResponse, Status>> = if req.text == "fail" {
            let mut details = ErrorDetails::with_error_info("THREAD_BUSY", "frontdesk.dev", HashMap::new());
            details.set_retry_info(Some(Duration::from_millis(500)));
            vec![
                event(1, "", started),
                event(
                    2,
                    "",
                    Kind::RunFailed(v1::RunFailed {
                        code: Code::Aborted as i32,
                        message: "thread busy".into(),
                        reason: "THREAD_BUSY".into(),
                        usage: None,
                    }),
                ),
                Err(Status::with_error_details(Code::Aborted, "thread busy", details)),
            ]
        } else if req.text == "truncate" {
            vec![event(1, "", started)]
        } else {
            let reply = format!("You said: {}", req.text);
            let mut items = vec![
                event(1, "", started),
                event(2, "supervisor", Kind::NodeStarted(v1::NodeStarted { step: 0 })),
                event(
                    3,
                    "supervisor",
                    Kind::LlmCallFinished(v1::LlmCallFinished {
                        model: "gpt-4o-mini".into(),
                        usage: Some(v1::Usage { prompt_tokens: 230, completion_tokens: 12, cost_usd: 0.0001 }),
                        latency: Some(prost_types::Duration { seconds: 0, nanos: 410_000_000 }),
                        purpose: "supervisor.route".into(),
                        attempts: 1,
                        error: String::new(),
                    }),
                ),
                event(
                    4,
                    "supervisor",
                    Kind::NodeFinished(v1::NodeFinished {
                        step: 0,
                        update_json: "{}".into(),
                        duration: Some(prost_types::Duration { seconds: 0, nanos: 12_000_000 }),
                        next_node: "chat_agent".into(),
                    }),
                ),
                event(5, "chat_agent", Kind::NodeStarted(v1::NodeStarted { step: 1 })),
            ];
            let mut id = 6;
            for word in reply.split_inclusive(' ') {
                items.push(event(id, "chat_agent", Kind::TokenDelta(v1::TokenDelta { text: word.to_string() })));
                id += 1;
            }
            items.push(event(
                id,
                "chat_agent",
                Kind::NodeFinished(v1::NodeFinished { step: 1, next_node: String::new(), ..Default::default() }),
            ));
            items.push(event(id + 1, "", Kind::RunFinished(v1::RunFinished { steps: 2, ..Default::default() })));
            items.push(Ok(v1::SendMessageResponse {
                payload: Some(v1::send_message_response::Payload::Result(v1::TurnResult {
                    run_id: "run-1".into(),
                    reply: Some(assistant(&reply)),
                    conversation: Some(conversation(&req.conversation_id, v1::IntakeMode::Elicitation)),
                    replayed: false,
                })),
            }));
            items
        };
        Ok(Response::new(Box::pin(futures::stream::iter(items))))
    }

    async fn get_conversation(
        &self,
        request: Request<v1::GetConversationRequest>,
    ) -> Result<Response<v1::GetConversationResponse>, Status> {
        let id = request.into_inner().conversation_id;
        if id == "missing" || id == "fresh" {
            return Err(not_found("conversation"));
        }
        let user = v1::Message { role: v1::Role::User as i32, text: "I need a laptop".into(), ..Default::default() };
        Ok(Response::new(v1::GetConversationResponse {
            conversation: Some(conversation(&id, v1::IntakeMode::Elicitation)),
            messages: vec![assistant("Welcome! How can I help?"), user, assistant("What is your budget?")],
        }))
    }

    async fn list_conversations(
        &self,
        _request: Request<v1::ListConversationsRequest>,
    ) -> Result<Response<v1::ListConversationsResponse>, Status> {
        Ok(Response::new(v1::ListConversationsResponse {
            conversations: vec![conversation("c-2", v1::IntakeMode::Review), conversation("c-1", v1::IntakeMode::Chat)],
            next_page_token: String::new(),
        }))
    }

    async fn reset_conversation(
        &self,
        request: Request<v1::ResetConversationRequest>,
    ) -> Result<Response<v1::ResetConversationResponse>, Status> {
        let id = request.into_inner().conversation_id;
        Ok(Response::new(v1::ResetConversationResponse { conversation: Some(conversation(&id, v1::IntakeMode::Chat)) }))
    }

    async fn delete_conversation(
        &self,
        request: Request<v1::DeleteConversationRequest>,
    ) -> Result<Response<v1::DeleteConversationResponse>, Status> {
        if request.into_inner().conversation_id == "missing" {
            return Err(not_found("conversation"));
        }
        Ok(Response::new(v1::DeleteConversationResponse {}))
    }
}

type RunStream = Pin<Box<dyn Stream<Item = Result<v1::SubscribeRunResponse, Status>> + Send>>;

#[tonic::async_trait]
impl WorkflowService for Mock {
    type SubscribeRunStream = RunStream;

    /// Run `run-1` has three events; others are unknown.
    async fn subscribe_run(&self, request: Request<v1::SubscribeRunRequest>) -> Result<Response<RunStream>, Status> {
        let v1::SubscribeRunRequest { run_id, after_event_id } = request.into_inner();
        if run_id != "run-1" {
            return Err(not_found("run"));
        }
        let finished = Kind::RunFinished(v1::RunFinished::default());
        let kinds =
            [Kind::NodeStarted(v1::NodeStarted::default()), Kind::NodeFinished(v1::NodeFinished::default()), finished];
        let items: Vec<Result<v1::SubscribeRunResponse, Status>> = kinds
            .into_iter()
            .zip(1u64..)
            .filter(|(_, id)| *id > after_event_id)
            .map(|(kind, id)| {
                let event =
                    v1::RunEvent { run_id: run_id.clone(), event_id: id, kind: Some(kind), ..Default::default() };
                Ok(v1::SubscribeRunResponse { event: Some(event), skipped: 0 })
            })
            .collect();
        Ok(Response::new(Box::pin(futures::stream::iter(items))))
    }

    async fn list_workflows(
        &self,
        _request: Request<v1::ListWorkflowsRequest>,
    ) -> Result<Response<v1::ListWorkflowsResponse>, Status> {
        Ok(Response::new(v1::ListWorkflowsResponse {
            workflows: vec![v1::Workflow {
                name: "intake".into(),
                description: "Change and demand requests".into(),
                kind: v1::WorkflowKind::Conversational as i32,
            }],
        }))
    }

    async fn describe_workflow(
        &self,
        request: Request<v1::DescribeWorkflowRequest>,
    ) -> Result<Response<v1::DescribeWorkflowResponse>, Status> {
        let name = request.into_inner().name;
        if name != "intake" {
            return Err(not_found("workflow"));
        }
        let edge = |s: &str, t: &str, conditional| v1::GraphEdge { source: s.into(), target: t.into(), conditional };
        Ok(Response::new(v1::DescribeWorkflowResponse {
            workflow: Some(v1::Workflow {
                name,
                description: "Change and demand requests".into(),
                kind: v1::WorkflowKind::Conversational as i32,
            }),
            nodes: vec![
                v1::GraphNode {
                    name: "supervisor".into(),
                    description: "Routes the turn".into(),
                    fan_out: false,
                    effects: false,
                },
                v1::GraphNode {
                    name: "chat_agent".into(),
                    description: "Small talk".into(),
                    fan_out: false,
                    effects: false,
                },
            ],
            edges: vec![edge("__start__", "supervisor", false), edge("supervisor", "chat_agent", true)],
            mermaid: "flowchart TD\n  supervisor --> chat_agent\n".into(),
            failure_node: String::new(),
        }))
    }

    async fn cancel_run(
        &self,
        request: Request<v1::CancelRunRequest>,
    ) -> Result<Response<v1::CancelRunResponse>, Status> {
        Ok(Response::new(v1::CancelRunResponse { cancelled: request.into_inner().run_id == "run-1" }))
    }

    async fn list_llm_calls(
        &self,
        _request: Request<v1::ListLlmCallsRequest>,
    ) -> Result<Response<v1::ListLlmCallsResponse>, Status> {
        Err(Status::unimplemented("the mock keeps no LLM call log"))
    }
}

async fn serve() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(ConversationServiceServer::new(Mock))
            .add_service(WorkflowServiceServer::new(Mock))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    addr
}

#[tokio::test]
async fn client_round_trip() {
    let addr = serve().await;
    let client = Client::connect(format!("http://{addr}")).await.unwrap();

    let started = client.start_conversation("intake", StartOptions::default()).await.unwrap();
    assert_eq!(started.conversation.unwrap().conversation_id, "c-1");
    assert_eq!(started.welcome.unwrap().text, "Welcome! How can I help?");

    let (events, result) = client.send_message_and_wait("c-1", "hello there", SendOptions::default()).await.unwrap();
    assert_eq!(result.reply.unwrap().text, "You said: hello there");
    assert_eq!(events.first().unwrap().event_id, 1);
    assert!(events.windows(2).all(|w| w[1].event_id == w[0].event_id + 1));

    let mut stream = client.send_message("c-1", "hi", SendOptions::default()).await.unwrap();
    let mut last = None;
    while let Some(item) = stream.next().await {
        last = Some(item.unwrap());
    }
    assert!(matches!(last, Some(TurnEvent::Result(_))));

    assert_eq!(client.list_workflows().await.unwrap()[0].name, "intake");
    assert_eq!(client.describe_workflow("intake").await.unwrap().nodes.len(), 2);
    assert_eq!(client.list_conversations(None, 0, None).await.unwrap().conversations.len(), 2);
    assert_eq!(client.get_conversation("c-1").await.unwrap().messages.len(), 3);
    assert_eq!(client.reset_conversation("c-1", None).await.unwrap().conversation_id, "c-1");
    client.delete_conversation("c-1").await.unwrap();
    assert!(client.cancel_run("run-1").await.unwrap());
    assert!(!client.cancel_run("run-2").await.unwrap());

    let resumed: Vec<u64> = client
        .subscribe_run("run-1", 1)
        .await
        .unwrap()
        .map(|item| item.unwrap().event.unwrap().event_id)
        .collect()
        .await;
    assert_eq!(resumed, [2, 3], "the events after the one given");
    let missing = client.subscribe_run("run-2", 0).await.err().expect("an unknown run");
    assert_eq!(missing.code(), Some(Code::NotFound));
}

#[tokio::test]
async fn client_errors() {
    let addr = serve().await;
    let client = Client::connect(format!("http://{addr}")).await.unwrap();

    let err = client.send_message_and_wait("c-1", "fail", SendOptions::default()).await.unwrap_err();
    let api = err.api().expect("status error");
    assert_eq!(api.code, Code::Aborted);
    assert!(api.is_reason(v1::ErrorReason::ThreadBusy));
    assert_eq!(api.retry_after, Some(Duration::from_millis(500)));

    let err = client.send_message_and_wait("c-1", "", SendOptions::default()).await.unwrap_err();
    assert_eq!(err.code(), Some(Code::InvalidArgument));
    assert_eq!(err.api().unwrap().field_violations, vec![("text".to_string(), "must be non-empty".to_string())]);

    let err = client.send_message_and_wait("c-1", "truncate", SendOptions::default()).await.unwrap_err();
    assert!(matches!(err, ClientError::StreamEndedWithoutResult));

    let err = client.get_conversation("missing").await.unwrap_err();
    assert_eq!(err.code(), Some(Code::NotFound));
    assert_eq!(err.reason(), Some("NOT_FOUND"));

    // Nothing listens on port 1.
    let err = Client::connect("http://127.0.0.1:1").await.unwrap_err();
    assert!(matches!(err, ClientError::Transport(_)), "{err:?}");
    assert_eq!(err.code(), None);
}

struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

async fn cli(addr: SocketAddr, args: &[&str], stdin: &str) -> Run {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_frontdesk"))
        .args(args)
        .env("FRONTDESK_SERVER", format!("http://{addr}"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).await.unwrap();
    drop(input);
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output()).await.unwrap().unwrap();
    if std::env::var_os("SHOW_CLI_OUTPUT").is_some() {
        println!(
            "$ frontdesk {}\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Run {
        ok: out.status.success(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

#[tokio::test]
async fn cli_chat_piped() {
    let addr = serve().await;
    let run = cli(addr, &["chat"], "hello there\n\n/show\n/reset\n/quit\nnot sent\n").await;
    assert!(run.ok, "{}\n{}", run.stdout, run.stderr);
    let out = &run.stdout;
    assert!(out.contains("conversation: c-1 (workflow intake)"), "{out}");
    assert!(out.contains("assistant: Welcome! How can I help?"), "{out}");
    assert!(out.contains("you> hello there"), "{out}");
    assert!(out.contains("[2] supervisor ▸ started"), "{out}");
    assert!(out.contains("[4] supervisor ✓ 12ms → chat_agent"), "{out}");
    assert!(out.contains("llm gpt-4o-mini supervisor.route 230+12 tok $0.0001 410ms"), "{out}");
    assert!(out.contains("  │ You said: hello there\n"), "{out}");
    assert!(out.contains("assistant: You said: hello there\n"), "{out}");
    assert!(out.contains("mode: elicitation"), "{out}");
    assert!(out.contains("title: New laptop"), "{out}");
    assert!(out.contains("conversation reset: mode: chat"), "{out}");
    assert!(!out.contains("not sent"), "{out}");

    let quiet = cli(addr, &["chat", "--quiet-events", "--conversation", "fresh"], "hi\n").await;
    assert!(quiet.ok, "{}", quiet.stderr);
    assert!(quiet.stdout.contains("conversation: fresh"), "{}", quiet.stdout);
    assert!(quiet.stdout.contains("assistant: You said: hi"), "{}", quiet.stdout);
    assert!(!quiet.stdout.contains("supervisor"), "{}", quiet.stdout);

    let resumed = cli(addr, &["chat", "--conversation", "c-9"], "").await;
    assert!(resumed.ok, "{}", resumed.stderr);
    assert!(resumed.stdout.contains("continuing"), "{}", resumed.stdout);
    assert!(resumed.stdout.contains("assistant: What is your budget?"), "{}", resumed.stdout);

    let failing = cli(addr, &["chat"], "fail\nagain\n").await;
    assert!(!failing.ok);
    assert!(failing.stdout.contains("assistant: You said: again"), "{}", failing.stdout);
    assert!(failing.stderr.contains("error: ABORTED: thread busy"), "{}", failing.stderr);
}

#[tokio::test]
async fn cli_commands() {
    let addr = serve().await;

    let run = cli(addr, &["send", "c-1", "book", "a", "room"], "").await;
    assert!(run.ok, "{}", run.stderr);
    assert!(run.stdout.contains("assistant: You said: book a room"), "{}", run.stdout);
    assert!(run.stdout.contains("chat_agent"), "{}", run.stdout);

    let run = cli(addr, &["send", "c-1", "fail"], "").await;
    assert!(!run.ok);
    assert!(run.stdout.contains("run failed: ABORTED thread busy"), "{}", run.stdout);
    assert!(run.stderr.contains("error: ABORTED: thread busy"), "{}", run.stderr);
    assert!(run.stderr.contains("reason: THREAD_BUSY"), "{}", run.stderr);
    assert!(run.stderr.contains("retry after: 500ms"), "{}", run.stderr);

    let run = cli(addr, &["send", "c-1", ""], "").await;
    assert!(!run.ok);
    assert!(run.stderr.contains("error: INVALID_ARGUMENT: invalid request"), "{}", run.stderr);
    assert!(run.stderr.contains("field text: must be non-empty"), "{}", run.stderr);

    let run = cli(addr, &["workflows"], "").await;
    assert!(run.ok, "{}", run.stderr);
    assert!(run.stdout.contains("intake  conversational  Change and demand requests"), "{}", run.stdout);

    let run = cli(addr, &["workflows", "describe", "intake"], "").await;
    assert!(run.ok, "{}", run.stderr);
    assert!(run.stdout.contains("supervisor → chat_agent  (conditional)"), "{}", run.stdout);
    assert!(run.stdout.contains("flowchart TD"), "{}", run.stdout);

    let run = cli(addr, &["workflows", "describe", "nope"], "").await;
    assert!(!run.ok);
    assert!(run.stderr.contains("NOT_FOUND"), "{}", run.stderr);

    let run = cli(addr, &["conversation", "show", "c-1"], "").await;
    assert!(run.ok, "{}", run.stderr);
    assert!(run.stdout.contains("mode:         elicitation"), "{}", run.stdout);
    assert!(run.stdout.contains("user: I need a laptop"), "{}", run.stdout);
    assert!(run.stdout.contains("assistant (chat_agent): What is your budget?"), "{}", run.stdout);

    let run = cli(addr, &["conversation", "list"], "").await;
    assert!(run.ok, "{}", run.stderr);
    assert!(run.stdout.contains("c-2") && run.stdout.contains("review"), "{}", run.stdout);

    let run = cli(addr, &["conversation", "delete", "c-1"], "").await;
    assert!(run.ok && run.stdout.contains("deleted c-1"), "{}", run.stderr);
    let run = cli(addr, &["conversation", "delete", "missing"], "").await;
    assert!(!run.ok && run.stderr.contains("reason: NOT_FOUND"), "{}", run.stderr);

    let run = cli(addr, &["conversation", "start", "--id", "mine"], "").await;
    assert!(run.ok && run.stdout.starts_with("mine\n"), "{}", run.stdout);

    let run = cli(addr, &["--server", "http://127.0.0.1:1", "workflows"], "").await;
    assert!(!run.ok);
    assert!(run.stderr.starts_with("error: cannot connect to http://127.0.0.1:1: transport error: "), "{}", run.stderr);
}
