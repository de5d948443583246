//! `frontdesk`: command-line client for the Frontdesk service.

use std::fmt;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use frontdesk_client::{
    audit_entry_kind, code_name, describe_agent_message, describe_audit_entry, describe_citation,
    describe_critic_verdict, describe_event, describe_orchestrator_message, describe_status_change, describe_tool_call,
    format_duration, nodes_run, research_outcome_label, research_step_label, service_call_context, service_call_state,
    tool_calls, v1, AskOptions, AuditTrailKey, Certificate, Client, ClientError, ClientTlsConfig, Identity,
    InvestigationEvent, InvestigationStream, Reply, ResearchEvent, SendOptions, StartOptions, Timeouts, TriageEvent,
    TriageOptions, TurnEvent, CONVERSATION_ENDED, SERVICE_CALL_ROUTING_NODES,
};
use futures::StreamExt;
use tokio::io::AsyncBufReadExt;

#[derive(Debug, Parser)]
#[command(name = "frontdesk", version, about = "Command-line client for the Frontdesk service")]
struct Cli {
    /// Server address.
    #[arg(long, global = true, env = "FRONTDESK_SERVER", default_value = "http://127.0.0.1:50051")]
    server: String,

    /// API key (from `frontdesk-server keys create`), sent as `authorization: Bearer <key>` with
    /// every call.
    #[arg(long, global = true, env = "FRONTDESK_KEY", hide_env_values = true, value_name = "KEY")]
    api_key: Option<ApiKeyArg>,

    /// PEM file with the CA certificate(s) that signed the server's certificate. An `https://`
    /// server without it is verified against the system's roots.
    #[arg(long, global = true, env = "FRONTDESK_TLS_CA", value_name = "FILE")]
    tls_ca: Option<PathBuf>,

    /// PEM client certificate for mutual TLS (with --tls-key).
    #[arg(long, global = true, env = "FRONTDESK_TLS_CERT", value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,

    /// PEM private key of --tls-cert.
    #[arg(long, global = true, env = "FRONTDESK_TLS_KEY", value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,

    /// Fail each call that has not ended after this many seconds (such as 90 or 0.5) with
    /// DEADLINE_EXCEEDED, streamed ones included (a turn, a triage, a watch), retries counted
    /// in. Without it a call that answers once has 30 s and a streamed one no deadline. A run
    /// the server had started goes on after the CLI gives up on it.
    #[arg(long, global = true, env = "FRONTDESK_TIMEOUT", value_name = "SECONDS", value_parser = parse_seconds)]
    timeout: Option<std::time::Duration>,

    /// Do not retry: without it, calls with an idempotency key (--idempotency-key) are retried on
    /// UNAVAILABLE and ABORTED, and their broken streams re-attached to the run.
    #[arg(long, global = true)]
    no_retries: bool,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the server's workflows, or describe one.
    Workflows {
        #[command(subcommand)]
        command: Option<WorkflowsCommand>,
    },
    /// Chat with a workflow: reads one message per line from stdin (/help for commands).
    ///
    /// After each turn of a service call (`--workflow service_call`) it prints the reply, the
    /// nodes that ran, the tool calls (arguments, result or error, latency) and the node the call
    /// is at; it ends when the call has ended (hung up).
    Chat {
        /// Workflow of a new conversation (such as intake or service_call).
        #[arg(long, default_value = "intake")]
        workflow: String,
        /// Continue this conversation (it is created when it does not exist).
        #[arg(long)]
        conversation: Option<String>,
        #[command(flatten)]
        turn: TurnArgs,
    },
    /// Inspect and manage conversations.
    #[command(subcommand)]
    Conversation(ConversationCommand),
    /// Send one message to a conversation, stream the turn and print the reply.
    Send {
        /// Conversation id.
        id: String,
        /// The message (several words are joined with spaces).
        #[arg(required = true, num_args = 1..)]
        text: Vec<String>,
        #[command(flatten)]
        turn: TurnArgs,
        /// Idempotency key: a retry with the same key replays the first result.
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Cancel a running run.
    Cancel {
        /// Run id (as shown in the `run started` event).
        run_id: String,
    },
    /// List the model calls of a thread, or of one of its runs, oldest first, as the server's
    /// LLM call log recorded them.
    ///
    /// One line a call: time, run (the last group of its id), node, purpose, model, latency,
    /// prompt+completion tokens and status (`ok`, or `failed` with the error; the attempts when
    /// retried), then the totals. The server records calls only with `model.call_log` set to
    /// `redacted` or `full`; with it off a known thread lists none.
    LlmCalls {
        /// Thread id: a conversation id, a ticket thread (`customer_id:ticket_id`), an
        /// investigation id or a research id.
        thread: String,
        /// Only the calls of this run: its id (as the `run started` event shows it) or the part
        /// of it the RUN column shows.
        #[arg(long, value_name = "RUN_ID")]
        run: Option<String>,
        /// Also print each call's prompt messages and reply: in full when the server logs them
        /// in full (`model.call_log = "full"`), otherwise only their roles and sizes.
        #[arg(long)]
        prompts: bool,
        /// Calls fetched per request (1 to 500; 0 for the server's 50). Every page is read
        /// whatever the size.
        #[arg(long, default_value_t = 500, value_name = "N")]
        page_size: i32,
    },
    /// Triage a customer's support message and stream the run.
    ///
    /// Prints the ticket the message belongs to (new, or an active ticket it continues), streams
    /// the run's node, model and tool events, then the recommended action, urgency, type, status,
    /// suggested response and relevant articles.
    Triage {
        /// Customer id, as known to the customer directory (such as CUST-001).
        #[arg(long)]
        customer: String,
        /// Subject line of the ticket.
        #[arg(long)]
        subject: Option<String>,
        /// ISO 639-1 language of the message (such as `es`); detected when omitted.
        #[arg(long)]
        language: Option<String>,
        /// Idempotency key: a retry with the same key replays the first result.
        #[arg(long)]
        idempotency_key: Option<String>,
        /// Do not print the run's node events, only the ticket and the result.
        #[arg(long)]
        quiet_events: bool,
        /// The customer's message (several words are joined with spaces).
        #[arg(required = true, num_args = 1..)]
        message: Vec<String>,
    },
    /// List a customer's tickets: active ones, then archived ones (most recent first).
    Tickets {
        /// Customer id.
        #[arg(long)]
        customer: String,
        /// Only active tickets (awaiting a specialist or a follow-up).
        #[arg(long, conflicts_with = "status")]
        active: bool,
        /// Only tickets with this status.
        #[arg(long, value_enum)]
        status: Option<StatusArg>,
        /// Archived tickets per page (server default when 0).
        #[arg(long, default_value_t = 0)]
        page_size: i32,
        /// Continue from a previous listing's next page token (archived tickets only).
        #[arg(long)]
        page_token: Option<String>,
        /// Fetch every page of archived tickets.
        #[arg(long)]
        all: bool,
    },
    /// Inspect a support ticket.
    #[command(subcommand)]
    Ticket(TicketCommand),
    /// Investigate HR mutations: start an investigation, answer its pending actions, inspect it.
    #[command(subcommand)]
    Investigate(InvestigateCommand),
    /// Ask a research question and stream the critic loop.
    ///
    /// Streams the run's node events, the orchestrator's messages (`sender -> receiver (type)
    /// [step N]: content`), each plan, each research result with its citations
    /// (`[document_id#passage] title`), each critic decision (`critic_x: APPROVE|REJECT (retry k)
    /// feedback`) and the expert's answer, then the research: its outcome, final answer and
    /// reasoning trace.
    Ask {
        /// The question (several words are joined with spaces).
        #[arg(required = true, num_args = 1..)]
        question: Vec<String>,
        /// Rejections allowed before the question is given up (server default 5 when omitted; at
        /// most 20).
        #[arg(long, value_name = "N")]
        retry_limit: Option<u32>,
        /// The document corpus to research (server default `sample` when omitted).
        #[arg(long, value_name = "NAME")]
        corpus: Option<String>,
        /// Idempotency key: a retry with the same key and question returns the first call's
        /// outcome.
        #[arg(long, visible_alias = "idempotency-key", value_name = "K")]
        key: Option<String>,
        /// Do not print the run's node events (messages, plans, results and decisions still
        /// print).
        #[arg(long)]
        quiet_events: bool,
    },
    /// Inspect research questions asked with `frontdesk ask`.
    #[command(subcommand)]
    Research(ResearchCommand),
}

#[derive(Debug, Subcommand)]
enum ResearchCommand {
    /// Print a research: question, outcome, plan, results with citations, expert answer, final
    /// answer, reasoning trace and the orchestrator's messages.
    Show {
        /// Research id (such as RES-0190...).
        research_id: String,
    },
    /// List research, ordered by research id.
    List {
        /// Research per page (server default when 0).
        #[arg(long, default_value_t = 0)]
        page_size: i32,
        /// Continue from a previous listing's next page token.
        #[arg(long)]
        page_token: Option<String>,
        /// Fetch every page.
        #[arg(long)]
        all: bool,
    },
}

/// The options `frontdesk ask` sends.
fn ask_options(retry_limit: Option<u32>, corpus: Option<String>, key: Option<String>) -> AskOptions {
    AskOptions { retry_limit, corpus, idempotency_key: key }
}

#[derive(Debug, Subcommand)]
enum InvestigateCommand {
    /// Start the investigation of an HR mutation and stream it.
    ///
    /// Streams the run's node events, each agent message (`sender -> receiver: action (status)`)
    /// and status change (`status: FROM -> TO`), then the investigation: its status, the actions
    /// it awaits (answer them with `frontdesk investigate respond`) and, once finished, the
    /// advisory report.
    Start {
        /// Mutation id, as known to the HR data (such as 1002).
        mutation_id: String,
        /// Idempotency key: a retry with the same key returns the first call's outcome.
        #[arg(long, visible_alias = "idempotency-key", value_name = "K")]
        key: Option<String>,
        /// Do not print the run's node events (agent messages and status changes still print).
        #[arg(long)]
        quiet_events: bool,
    },
    /// Answer a pending action (the changer's clarification or the manager's decision) and
    /// stream the continuation, as `start` does.
    Respond {
        /// Investigation id (such as INV-1002).
        investigation_id: String,
        /// The pending action answered (such as INV-1002-changer).
        action_id: String,
        /// Who answers.
        #[arg(long = "as", value_enum, value_name = "ROLE")]
        role: RoleArg,
        /// The user answering; must be the action's recipient.
        #[arg(long, value_name = "USER_ID")]
        responder: String,
        /// The changer's clarification (required for the changer), or the manager's comment; at most
        /// 4,000 characters.
        #[arg(long, value_name = "T")]
        text: Option<String>,
        /// The manager approves the change.
        #[arg(long, conflicts_with = "deny")]
        approve: bool,
        /// The manager denies the change.
        #[arg(long)]
        deny: bool,
        /// Idempotency key: a retry with the same key and reply returns the first call's outcome.
        #[arg(long, visible_alias = "idempotency-key", value_name = "K")]
        key: Option<String>,
        /// Do not print the run's node events (agent messages and status changes still print).
        #[arg(long)]
        quiet_events: bool,
    },
    /// Print an investigation: mutation, status and its history, awaited actions, findings,
    /// report.
    Show {
        /// Investigation id (such as INV-1002).
        investigation_id: String,
    },
    /// List investigations, most recently started first.
    List {
        /// Only investigations with this status (such as awaiting_user_response).
        #[arg(long, value_name = "S", value_parser = parse_investigation_status)]
        status: Option<v1::InvestigationStatus>,
        /// Investigations per page (server default when 0).
        #[arg(long, default_value_t = 0)]
        page_size: i32,
        /// Continue from a previous listing's next page token.
        #[arg(long)]
        page_token: Option<String>,
        /// Fetch every page.
        #[arg(long)]
        all: bool,
    },
    /// Print an investigation's audit trail, or one message exchange's by correlation id.
    #[command(group(ArgGroup::new("trail").required(true).args(["investigation_id", "correlation"])))]
    Audit {
        /// Investigation id (such as INV-1002).
        investigation_id: Option<String>,
        /// Only the entries of this correlation id (a request and its result).
        #[arg(long, value_name = "C")]
        correlation: Option<String>,
        /// Print CSV: seq,time,correlation_id,actor,kind,summary.
        #[arg(long)]
        csv: bool,
    },
    /// List pending actions (notifications awaiting a reply).
    Pending {
        /// Only the actions sent to this user.
        #[arg(long, value_name = "U")]
        recipient: Option<String>,
        /// The answered actions instead, with their replies.
        #[arg(long)]
        answered: bool,
    },
    /// Print an investigation's audit trail and follow it until the advisory report is
    /// generated.
    Watch {
        /// Investigation id (such as INV-1002).
        investigation_id: String,
        /// Only entries after this sequence number (0: the whole trail).
        #[arg(long, value_name = "N", default_value_t = 0)]
        after: u32,
    },
}

/// Who answers a pending action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum RoleArg {
    /// The person who made the change.
    Changer,
    /// The changer's manager.
    Manager,
}

impl From<RoleArg> for v1::ResponderRole {
    fn from(role: RoleArg) -> Self {
        match role {
            RoleArg::Changer => v1::ResponderRole::Changer,
            RoleArg::Manager => v1::ResponderRole::Manager,
        }
    }
}

/// Parses an investigation status given as the CLI prints it (`awaiting_user_response`), in
/// kebab case, upper case, with its `INVESTIGATION_STATUS_` prefix, or in camel case
/// (`AwaitingUserResponse`).
fn parse_investigation_status(s: &str) -> Result<v1::InvestigationStatus, String> {
    let mut name = String::new();
    let mut previous_lower = false;
    for c in s.trim().chars() {
        if c.is_uppercase() && previous_lower {
            name.push('_');
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        name.push(if c == '-' || c == ' ' { '_' } else { c.to_ascii_uppercase() });
    }
    let full = if name.starts_with("INVESTIGATION_STATUS_") { name } else { format!("INVESTIGATION_STATUS_{name}") };
    match v1::InvestigationStatus::from_str_name(&full) {
        Some(v1::InvestigationStatus::Unspecified) | None => {
            let known: Vec<String> = (1..)
                .map_while(|v| v1::InvestigationStatus::try_from(v).ok())
                .map(|st| investigation_status_name(st as i32))
                .collect();
            Err(format!("unknown status; one of: {}", known.join(", ")))
        }
        Some(status) => Ok(status),
    }
}

/// The reply `frontdesk investigate respond` sends.
fn build_reply(
    role: RoleArg,
    responder: String,
    text: Option<String>,
    approve: bool,
    deny: bool,
    key: Option<String>,
) -> Reply {
    let decision = match (approve, deny) {
        (true, _) => Some(v1::ManagerDecision::Approve),
        (false, true) => Some(v1::ManagerDecision::Deny),
        (false, false) => None,
    };
    Reply { role: role.into(), responder_id: responder, text, decision, idempotency_key: key }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StatusArg {
    Active,
    Resolved,
    Escalated,
}

#[derive(Debug, Subcommand)]
enum TicketCommand {
    /// Print a ticket, its messages and its latest triage result.
    Show {
        /// The ticket's customer (tickets are only visible to their own customer).
        #[arg(long)]
        customer: String,
        /// Ticket id (such as TKT-1A2B3C4D).
        ticket: String,
    },
}

#[derive(Debug, Args)]
struct TurnArgs {
    /// Do not print the run's node events, only replies.
    #[arg(long)]
    quiet_events: bool,
    /// Wait for a turn already running on the conversation instead of failing.
    #[arg(long)]
    queue: bool,
}

#[derive(Debug, Subcommand)]
enum WorkflowsCommand {
    /// List workflows (the default).
    List,
    /// Print a workflow's nodes, edges and mermaid graph.
    Describe {
        /// Workflow name.
        name: String,
    },
}

#[derive(Debug, Subcommand)]
enum ConversationCommand {
    /// Start a conversation; prints its id, then the welcome message.
    Start {
        #[arg(long, default_value = "intake")]
        workflow: String,
        /// Caller-chosen conversation id.
        #[arg(long)]
        id: Option<String>,
    },
    /// Print a conversation's state and its whole message history.
    Show {
        /// Conversation id.
        id: String,
    },
    /// List conversations, ordered by id.
    List {
        /// Only conversations of this workflow.
        #[arg(long)]
        workflow: Option<String>,
        /// Conversations per page (server default when 0).
        #[arg(long, default_value_t = 0)]
        page_size: i32,
        /// Continue from a previous listing's next page token.
        #[arg(long)]
        page_token: Option<String>,
        /// Fetch every page.
        #[arg(long)]
        all: bool,
    },
    /// Clear a conversation's messages and collected fields.
    Reset {
        /// Conversation id.
        id: String,
    },
    /// Delete a conversation and all its checkpoints.
    Delete {
        /// Conversation id.
        id: String,
    },
}

/// An `--api-key` value; `Debug` (of `Cli`) never shows it.
#[derive(Clone)]
struct ApiKeyArg(String);

impl FromStr for ApiKeyArg {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(ApiKeyArg(s.to_owned()))
    }
}

impl fmt::Debug for ApiKeyArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A positive number of seconds, such as `30` or `0.5`.
fn parse_seconds(s: &str) -> Result<std::time::Duration, String> {
    let secs: f64 = s.trim().parse().map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if secs.is_nan() || secs <= 0.0 {
        return Err(format!("`{s}`: the timeout must be more than 0 seconds"));
    }
    std::time::Duration::try_from_secs_f64(secs).map_err(|_| format!("`{s}` seconds is too long"))
}

/// The deadlines `--timeout` asks for: every call's, streamed or not; the client's defaults
/// without it.
fn timeouts(cli: &Cli) -> Timeouts {
    match cli.timeout {
        Some(t) => Timeouts { unary: Some(t), streaming: Some(t) },
        None => Timeouts::default(),
    }
}

/// Connects as the global options say: the server, the API key, TLS, deadlines, retries.
async fn connect(cli: &Cli) -> Result<Client, CliError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|e| CliError::Io(std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))))
    };
    let mut builder = Client::builder(cli.server.clone()).timeouts(timeouts(cli));
    if cli.no_retries {
        builder = builder.no_retries();
    }
    // An empty FRONTDESK_KEY means no key, as an unset one does.
    if let Some(key) = cli.api_key.as_ref().filter(|k| !k.0.trim().is_empty()) {
        builder = builder.api_key(key.0.clone());
    }
    if cli.tls_ca.is_some() || cli.tls_cert.is_some() {
        let mut tls = ClientTlsConfig::new();
        tls = match &cli.tls_ca {
            Some(ca) => tls.ca_certificate(Certificate::from_pem(read(ca)?)),
            None => tls.with_enabled_roots(),
        };
        if let (Some(cert), Some(key)) = (&cli.tls_cert, &cli.tls_key) {
            tls = tls.identity(Identity::from_pem(read(cert)?, read(key)?));
        }
        builder = builder.tls(tls);
    }
    builder.connect().await.map_err(|e| CliError::Connect(cli.server.clone(), e))
}

/// A failure of the CLI: a client error or a local I/O error.
#[derive(Debug)]
enum CliError {
    /// The server could not be reached.
    Connect(String, ClientError),
    Client(ClientError),
    Io(std::io::Error),
}

impl From<ClientError> for CliError {
    fn from(e: ClientError) -> Self {
        CliError::Client(e)
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Io(e)
    }
}

fn print_error(e: &CliError) {
    match e {
        CliError::Io(e) => eprintln!("error: {e}"),
        CliError::Connect(server, e) => eprintln!("error: cannot connect to {server}: {e}"),
        CliError::Client(ClientError::Status(api)) => {
            eprintln!("error: {}: {}", code_name(api.code), api.message);
            if let Some(reason) = &api.reason {
                eprintln!("  reason: {reason}");
            }
            for (field, description) in &api.field_violations {
                eprintln!("  field {field}: {description}");
            }
            if let Some(delay) = api.retry_after {
                eprintln!("  retry after: {}", format_duration(delay));
            }
        }
        CliError::Client(e) => eprintln!("error: {e}"),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            print_error(&e);
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode, CliError> {
    let client = connect(&cli).await?;
    match cli.command {
        Command::Workflows { command: None | Some(WorkflowsCommand::List) } => list_workflows(&client).await?,
        Command::Workflows { command: Some(WorkflowsCommand::Describe { name }) } => {
            describe_workflow(&client, &name).await?
        }
        Command::Chat { workflow, conversation, turn } => return chat(&client, &workflow, conversation, &turn).await,
        Command::Conversation(cmd) => conversation(&client, cmd).await?,
        Command::Send { id, text, turn, idempotency_key } => {
            let mut printer = Printer::new(turn.quiet_events);
            let opts = SendOptions { idempotency_key, queue_if_busy: turn.queue };
            printer.turn(&client, &id, &text.join(" "), opts).await?;
        }
        Command::Cancel { run_id } => {
            if client.cancel_run(&run_id).await? {
                println!("cancelled {run_id}");
            } else {
                println!("run {run_id} had already ended");
            }
        }
        Command::LlmCalls { thread, run, prompts, page_size } => {
            list_llm_calls(&client, &thread, run.as_deref(), prompts, page_size).await?
        }
        Command::Triage { customer, subject, language, idempotency_key, quiet_events, message } => {
            let opts = TriageOptions { subject, language, idempotency_key };
            Printer::new(quiet_events).triage(&client, &customer, &message.join(" "), opts).await?;
        }
        Command::Tickets { customer, active, status, page_size, page_token, all } => {
            let status = if active { Some(StatusArg::Active) } else { status };
            list_tickets(&client, &customer, status, page_size, page_token, all).await?
        }
        Command::Ticket(TicketCommand::Show { customer, ticket }) => show_ticket(&client, &customer, &ticket).await?,
        Command::Investigate(cmd) => investigate(&client, cmd).await?,
        Command::Ask { question, retry_limit, corpus, key, quiet_events } => {
            let opts = ask_options(retry_limit, corpus, key);
            Printer::new(quiet_events).ask(&client, &question.join(" "), opts).await?;
        }
        Command::Research(cmd) => research(&client, cmd).await?,
    }
    Ok(ExitCode::SUCCESS)
}

// ---------------------------------------------------------------------------------------------
// Output helpers

fn color_enabled() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

fn kind_name(kind: i32) -> &'static str {
    match v1::WorkflowKind::try_from(kind) {
        Ok(v1::WorkflowKind::Conversational) => "conversational",
        Ok(v1::WorkflowKind::Task) => "task",
        _ => "unspecified",
    }
}

fn mode_name(mode: i32) -> String {
    match v1::IntakeMode::try_from(mode) {
        Ok(m) => m.as_str_name().trim_start_matches("INTAKE_MODE_").to_lowercase(),
        Err(_) => format!("mode#{mode}"),
    }
}

fn role_name(role: i32) -> &'static str {
    match v1::Role::try_from(role) {
        Ok(v1::Role::User) => "user",
        Ok(v1::Role::Assistant) => "assistant",
        Ok(v1::Role::System) => "system",
        _ => "unknown",
    }
}

/// A proto enum value's name without its prefix, lower-cased (`RECOMMENDED_ACTION_AUTO_RESPOND`
/// → `auto_respond`); `-` when unspecified.
fn enum_label(name: Option<&str>, prefix: &str) -> String {
    match name.map(|n| n.strip_prefix(prefix).unwrap_or(n)) {
        Some("UNSPECIFIED") | None => "-".to_string(),
        Some(n) => n.to_lowercase(),
    }
}

fn status_name(v: i32) -> String {
    enum_label(v1::TicketStatus::try_from(v).ok().map(|e| e.as_str_name()), "TICKET_STATUS_")
}

fn urgency_name(v: i32) -> String {
    enum_label(v1::Urgency::try_from(v).ok().map(|e| e.as_str_name()), "URGENCY_")
}

fn ticket_type_name(v: i32) -> String {
    enum_label(v1::TicketType::try_from(v).ok().map(|e| e.as_str_name()), "TICKET_TYPE_")
}

fn action_name(v: i32) -> String {
    enum_label(v1::RecommendedAction::try_from(v).ok().map(|e| e.as_str_name()), "RECOMMENDED_ACTION_")
}

fn confidence_name(v: i32) -> String {
    enum_label(v1::MatchConfidence::try_from(v).ok().map(|e| e.as_str_name()), "MATCH_CONFIDENCE_")
}

/// `(new)`, `(new, confidence low)` or `(continues existing, confidence high)`.
fn resolution_summary(r: &v1::TicketResolution) -> String {
    let mut out = if r.matched_existing { "continues existing".to_string() } else { "new".to_string() };
    if r.confidence != v1::MatchConfidence::Unspecified as i32 {
        out.push_str(&format!(", confidence {}", confidence_name(r.confidence)));
    }
    format!("({out})")
}

/// Prints `text` under a heading line, indented by two spaces.
fn print_block(out: &mut impl Write, heading: &str, text: &str) -> std::io::Result<()> {
    writeln!(out, "{heading}")?;
    for line in text.trim_end().lines() {
        writeln!(out, "  {line}")?;
    }
    Ok(())
}

/// The result block of a triage: action, urgency, type, status, the suggested response (and its
/// English version when it differs) and the relevant articles.
fn write_triage_result(out: &mut impl Write, r: &v1::TriageResult) -> std::io::Result<()> {
    let escalation = if r.requires_escalation { " (escalation required)" } else { "" };
    writeln!(out, "action:   {}{escalation}", action_name(r.recommended_action))?;
    writeln!(out, "urgency:  {}", urgency_name(r.urgency))?;
    writeln!(out, "type:     {}", ticket_type_name(r.ticket_type))?;
    writeln!(out, "status:   {}", status_name(r.status))?;
    if !r.language.is_empty() {
        writeln!(out, "language: {}", r.language)?;
    }
    if let Some(info) = &r.extracted_info {
        let parts: Vec<String> =
            [("area", &info.product_area), ("issue", &info.issue_type), ("sentiment", &info.sentiment)]
                .iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
        if !parts.is_empty() {
            writeln!(out, "details:  {}", parts.join(" · "))?;
        }
    }
    if !r.reasoning.is_empty() {
        writeln!(out, "reasoning: {}", r.reasoning.trim())?;
    }
    if r.suggested_response.is_empty() {
        writeln!(out, "suggested response: -")?;
    } else {
        print_block(out, "suggested response:", &r.suggested_response)?;
    }
    let english = r.suggested_response_english.trim();
    if !english.is_empty() && english != r.suggested_response.trim() {
        print_block(out, "suggested response (English):", english)?;
    }
    if r.relevant_articles.is_empty() {
        writeln!(out, "relevant articles: none")?;
    } else {
        writeln!(out, "relevant articles:")?;
        for id in &r.relevant_articles {
            match r.kb_results.iter().find(|h| &h.article_id == id) {
                Some(hit) if !hit.title.is_empty() => writeln!(out, "  {id}  {}", hit.title)?,
                _ => writeln!(out, "  {id}")?,
            }
        }
    }
    Ok(())
}

fn timestamp(t: Option<&prost_types::Timestamp>) -> String {
    match t {
        Some(t) => prost_types::Timestamp { seconds: t.seconds, nanos: 0 }.to_string(),
        None => "-".to_string(),
    }
}

/// The MODE column of a conversation listing: an intake conversation's mode, a service call's
/// current node (`ended` once hung up).
fn conversation_mode(c: &v1::Conversation) -> String {
    match &c.state {
        Some(v1::conversation::State::Intake(s)) => mode_name(s.mode),
        Some(v1::conversation::State::ServiceCall(s)) if s.call_ended => "ended".to_string(),
        Some(v1::conversation::State::ServiceCall(s)) => s.current_node.clone(),
        None => "-".to_string(),
    }
}

/// A service call's missing fields and model use on one line, with the current node first when
/// `with_node`: `node: Plan · missing: customer_phone_number · 3 model calls, 250+30 tok`.
fn service_call_summary(s: &v1::ServiceCallState, with_node: bool) -> String {
    let mut parts = Vec::new();
    if with_node {
        parts.push(format!("node: {}", if s.current_node.is_empty() { "-" } else { &s.current_node }));
    }
    if !s.missing_mandatory_fields.is_empty() {
        parts.push(format!("missing: {}", s.missing_mandatory_fields.join(", ")));
    }
    parts.push(format!("{} model calls, {}+{} tok", s.model_calls, s.prompt_tokens, s.completion_tokens));
    if s.call_ended {
        parts.push("call ended".to_string());
    }
    parts.join(" · ")
}

/// What a service call's turn did, after its reply: the flow's nodes that ran, each tool call
/// (arguments, result or error, latency) and the node the call is now at.
fn write_service_call_turn(
    out: &mut impl Write,
    events: &[v1::RunEvent],
    s: &v1::ServiceCallState,
) -> std::io::Result<()> {
    let nodes = nodes_run(events, &SERVICE_CALL_ROUTING_NODES);
    writeln!(out, "  nodes: {}", if nodes.is_empty() { "-".to_string() } else { nodes.join(" → ") })?;
    for call in tool_calls(events) {
        writeln!(out, "  tool [{}] {}", call.node, describe_tool_call(&call))?;
    }
    if s.call_ended {
        writeln!(out, "  current node: {} (the call has ended)", s.current_node)
    } else {
        writeln!(out, "  current node: {}", if s.current_node.is_empty() { "-" } else { &s.current_node })
    }
}

/// Whether a turn's result says the service call has ended.
fn call_ended(r: &v1::TurnResult) -> bool {
    r.conversation.as_ref().and_then(service_call_state).is_some_and(|s| s.call_ended)
}

/// Whether an error is the refusal of a message to a conversation that has ended.
fn is_conversation_ended(e: &CliError) -> bool {
    matches!(e, CliError::Client(e) if e.reason() == Some(CONVERSATION_ENDED))
}

/// One line summarising a conversation's state, such as `mode: elicitation · missing: budget`.
fn state_summary(c: &v1::Conversation) -> String {
    let mut parts = Vec::new();
    match &c.state {
        Some(v1::conversation::State::Intake(s)) => {
            parts.push(format!("mode: {}", mode_name(s.mode)));
            if !s.collected_fields.is_empty() {
                parts.push(format!("collected: {}", s.collected_fields.len()));
            }
            if !s.missing_fields.is_empty() {
                parts.push(format!("missing: {}", s.missing_fields.join(", ")));
            }
            if !s.identified_team_name.is_empty() || !s.identified_team_id.is_empty() {
                parts.push(format!("team: {}", team_name(s)));
            }
            if !s.submission_url.is_empty() {
                parts.push(format!("submitted: {}", s.submission_url));
            }
            if !s.submission_error.is_empty() {
                parts.push(format!("submission error: {}", s.submission_error));
            }
        }
        Some(v1::conversation::State::ServiceCall(s)) => parts.push(service_call_summary(s, true)),
        None => parts.push("no state".to_string()),
    }
    parts.join(" · ")
}

fn team_name(s: &v1::IntakeState) -> String {
    match (s.identified_team_name.is_empty(), s.identified_team_id.is_empty()) {
        (false, false) => format!("{} ({})", s.identified_team_name, s.identified_team_id),
        (false, true) => s.identified_team_name.clone(),
        _ => s.identified_team_id.clone(),
    }
}

fn print_state(c: &v1::Conversation) {
    println!("conversation: {}", c.conversation_id);
    println!("workflow:     {}", c.workflow);
    println!("turns:        {} (version {})", c.turn_count, c.version);
    println!("created:      {}", timestamp(c.create_time.as_ref()));
    println!("updated:      {}", timestamp(c.update_time.as_ref()));
    if let Some(s) = service_call_state(c) {
        print_service_call_state(s);
        return;
    }
    let Some(v1::conversation::State::Intake(s)) = &c.state else {
        return;
    };
    println!("mode:         {}", mode_name(s.mode));
    let team = team_name(s);
    println!("team:         {}", if team.is_empty() { "-" } else { &team });
    println!("submission:   {}", if s.submission_url.is_empty() { "-" } else { &s.submission_url });
    if !s.submission_error.is_empty() {
        println!("submission error: {}", s.submission_error);
    }
    let mut fields: Vec<_> = s.collected_fields.iter().collect();
    fields.sort();
    if fields.is_empty() {
        println!("collected fields: none");
    } else {
        println!("collected fields:");
        for (k, v) in fields {
            println!("  {k}: {v}");
        }
    }
    if !s.fields_marked_unknown.is_empty() {
        println!("unknown fields: {}", s.fields_marked_unknown.join(", "));
    }
    if !s.missing_fields.is_empty() {
        println!("missing fields: {}", s.missing_fields.join(", "));
    }
}

fn print_service_call_state(s: &v1::ServiceCallState) {
    print!("{}", render_service_call_state(s));
}

/// A service call's state as `conversation show` prints it, the context last, indented.
fn render_service_call_state(s: &v1::ServiceCallState) -> String {
    let mut out = String::new();
    let dash = |v: String| if v.is_empty() { "-".to_string() } else { v };
    out.push_str(&format!("current node: {}\n", dash(s.current_node.clone())));
    out.push_str(&format!("call ended:   {}\n", if s.call_ended { "yes" } else { "no" }));
    out.push_str(&format!("path:         {}\n", dash(s.node_traversal_path.join(" → "))));
    out.push_str(&format!("missing:      {}\n", dash(s.missing_mandatory_fields.join(", "))));
    out.push_str(&format!(
        "model calls:  {} ({} prompt + {} completion tokens)\n",
        s.model_calls, s.prompt_tokens, s.completion_tokens
    ));
    let context = match service_call_context(s) {
        Ok(v) => serde_json::to_string_pretty(&v).unwrap_or_else(|_| s.context_json.clone()),
        Err(_) => s.context_json.clone(),
    };
    out.push_str("context:\n");
    for line in context.lines() {
        out.push_str(&format!("  {line}\n"));
    }
    out
}

fn print_message(m: &v1::Message) {
    let role = role_name(m.role);
    if m.node.is_empty() || role != "assistant" {
        println!("{role}: {}", m.text);
    } else {
        println!("{role} ({}): {}", m.node, m.text);
    }
}

/// Prints a turn's events as they stream, then its reply.
struct Printer {
    quiet: bool,
    color: bool,
    /// True while token deltas are being printed on an unfinished line.
    in_delta: bool,
}

impl Printer {
    fn new(quiet: bool) -> Self {
        Printer { quiet, color: color_enabled(), in_delta: false }
    }

    fn dim(&self, s: &str) -> String {
        if self.color {
            format!("\x1b[2m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }

    fn end_delta_line(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        if self.in_delta {
            writeln!(out)?;
            self.in_delta = false;
        }
        Ok(())
    }

    fn event(&mut self, e: &v1::RunEvent) -> std::io::Result<()> {
        if self.quiet {
            return Ok(());
        }
        let mut out = std::io::stdout().lock();
        if let Some(v1::run_event::Kind::TokenDelta(t)) = &e.kind {
            if !self.in_delta {
                write!(out, "{}", self.dim("  │ "))?;
                self.in_delta = true;
            }
            let text = t.text.replace('\n', "\n  │ ");
            write!(out, "{}", self.dim(&text))?;
        } else {
            self.end_delta_line(&mut out)?;
            writeln!(out, "{}", self.dim(&format!("  · {}", describe_event(e))))?;
        }
        out.flush()
    }

    /// The turn's reply and the conversation after it; for a service call also the nodes that
    /// ran, the tool calls and the current node (from the turn's `events`).
    fn result(&mut self, r: &v1::TurnResult, events: &[v1::RunEvent]) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        self.end_delta_line(&mut out)?;
        let reply = r.reply.as_ref().map(|m| m.text.as_str()).unwrap_or_default();
        writeln!(out, "assistant: {}", if reply.is_empty() { "(no reply)" } else { reply })?;
        if let Some(c) = &r.conversation {
            let replayed = if r.replayed { " · replayed" } else { "" };
            let summary = match service_call_state(c) {
                Some(s) => {
                    write_service_call_turn(&mut out, events, s)?;
                    service_call_summary(s, false)
                }
                None => state_summary(c),
            };
            writeln!(out, "{}", self.dim(&format!("  [{summary}{replayed}]")))?;
        }
        out.flush()
    }

    fn resolution(&mut self, r: &v1::TicketResolution) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        self.end_delta_line(&mut out)?;
        writeln!(out, "ticket: {} {}", r.ticket_id, resolution_summary(r))?;
        if !self.quiet {
            if !r.candidate_ticket_ids.is_empty() {
                writeln!(
                    out,
                    "{}",
                    self.dim(&format!("  · active tickets considered: {}", r.candidate_ticket_ids.join(", ")))
                )?;
            }
            if !r.reasoning.is_empty() {
                writeln!(out, "{}", self.dim(&format!("  · matcher: {}", r.reasoning.trim())))?;
            }
        }
        out.flush()
    }

    fn triage_result(&mut self, r: &v1::TriageResult) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        self.end_delta_line(&mut out)?;
        write_triage_result(&mut out, r)?;
        let replayed = if r.replayed { " · replayed" } else { "" };
        if !r.run_id.is_empty() || r.replayed {
            writeln!(out, "{}", self.dim(&format!("  [run {}{replayed}]", r.run_id)))?;
        }
        out.flush()
    }

    /// Triages one message, printing as it streams.
    async fn triage(
        &mut self,
        client: &Client,
        customer: &str,
        message: &str,
        opts: TriageOptions,
    ) -> Result<v1::TriageResult, CliError> {
        let stream = client.triage_ticket(customer, message, opts).await?;
        self.print_stream(stream, |cli, item| {
            match item {
                TriageEvent::Resolution(r) => cli.resolution(&r)?,
                TriageEvent::Event(e) => cli.event(&e)?,
                TriageEvent::Result(r) => {
                    cli.triage_result(&r)?;
                    return Ok(Some(r));
                }
            }
            Ok(None)
        })
        .await
    }

    fn agent_message(&mut self, m: &v1::AgentMessage) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        self.end_delta_line(&mut out)?;
        writeln!(out, "{}", describe_agent_message(m))?;
        out.flush()
    }

    fn status_change(&mut self, c: &v1::StatusChange) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        self.end_delta_line(&mut out)?;
        writeln!(out, "{}", describe_status_change(c))?;
        out.flush()
    }

    fn investigation_result(&mut self, inv: &v1::Investigation) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        self.end_delta_line(&mut out)?;
        writeln!(out)?;
        write_investigation(&mut out, inv, false)?;
        out.flush()
    }

    /// Prints an investigation's run as it streams: node events, agent messages, status changes,
    /// then the investigation.
    async fn investigation(&mut self, stream: InvestigationStream) -> Result<v1::Investigation, CliError> {
        self.print_stream(stream, |cli, item| {
            match item {
                InvestigationEvent::Event(e) => cli.event(&e)?,
                InvestigationEvent::Message(m) => cli.agent_message(&m)?,
                InvestigationEvent::StatusChange(c) => cli.status_change(&c)?,
                InvestigationEvent::Investigation(inv) => {
                    cli.investigation_result(&inv)?;
                    return Ok(Some(inv));
                }
            }
            Ok(None)
        })
        .await
    }

    /// Asks a research question, printing as it streams: node events (dimmed), orchestrator
    /// messages, plans, research results with their citations, critic decisions and the expert's
    /// answer, then the research.
    async fn ask(&mut self, client: &Client, question: &str, opts: AskOptions) -> Result<v1::Research, CliError> {
        let stream = client.ask(question, opts).await?;
        self.print_stream(stream, |cli, item| {
            if let ResearchEvent::Event(e) = &item {
                cli.event(e)?;
                return Ok(None);
            }
            let mut out = std::io::stdout().lock();
            cli.end_delta_line(&mut out)?;
            match &item {
                ResearchEvent::Event(_) => {}
                ResearchEvent::Message(m) => writeln!(out, "{}", describe_orchestrator_message(m))?,
                ResearchEvent::Plan(p) => write_plan(&mut out, p)?,
                ResearchEvent::Result(r) => write_research_result(&mut out, r)?,
                ResearchEvent::CriticDecision(v) => writeln!(out, "{}", describe_critic_verdict(v))?,
                ResearchEvent::ExpertAnswer(e) => write_expert_answer(&mut out, e)?,
                ResearchEvent::Research(r) => {
                    writeln!(out)?;
                    write_research(&mut out, r, false)?;
                }
            }
            out.flush()?;
            Ok(match item {
                ResearchEvent::Research(r) => Some(r),
                _ => None,
            })
        })
        .await
    }

    /// Runs one turn, printing as it streams.
    async fn turn(
        &mut self,
        client: &Client,
        id: &str,
        text: &str,
        opts: SendOptions,
    ) -> Result<v1::TurnResult, CliError> {
        let stream = client.send_message(id, text, opts).await?;
        let mut events = Vec::new();
        self.print_stream(stream, |cli, item| match item {
            TurnEvent::Event(e) => {
                cli.event(&e)?;
                events.push(e);
                Ok(None)
            }
            TurnEvent::Result(r) => {
                cli.result(&r, &events)?;
                Ok(Some(r))
            }
        })
        .await
    }

    /// Prints a streamed call's items as they arrive, each by `print`, which returns the call's
    /// result when the item carries it. A line of token deltas left open is closed at the end,
    /// and before the error that ends the stream.
    async fn print_stream<I, R>(
        &mut self,
        mut stream: impl futures::Stream<Item = Result<I, ClientError>> + Unpin,
        mut print: impl FnMut(&mut Self, I) -> Result<Option<R>, CliError>,
    ) -> Result<R, CliError> {
        let mut result = None;
        while let Some(item) = stream.next().await {
            let item = match item {
                Ok(item) => item,
                Err(e) => {
                    self.end_delta_line(&mut std::io::stdout().lock())?;
                    return Err(e.into());
                }
            };
            if let Some(r) = print(self, item)? {
                result = Some(r);
            }
        }
        self.end_delta_line(&mut std::io::stdout().lock())?;
        result.ok_or(CliError::Client(ClientError::StreamEndedWithoutResult))
    }
}

// ---------------------------------------------------------------------------------------------
// Commands

async fn list_workflows(client: &Client) -> Result<(), CliError> {
    let workflows = client.list_workflows().await?;
    if workflows.is_empty() {
        println!("no workflows");
    }
    let width = workflows.iter().map(|w| w.name.len()).max().unwrap_or(0).max(4);
    for w in workflows {
        println!("{:<width$}  {:<14}  {}", w.name, kind_name(w.kind), w.description);
    }
    Ok(())
}

async fn describe_workflow(client: &Client, name: &str) -> Result<(), CliError> {
    let d = client.describe_workflow(name).await?;
    let w = d.workflow.unwrap_or_default();
    println!("workflow: {} ({})", if w.name.is_empty() { name } else { &w.name }, kind_name(w.kind));
    if !w.description.is_empty() {
        println!("  {}", w.description);
    }
    println!();
    println!("nodes:");
    let width = d.nodes.iter().map(|n| n.name.len()).max().unwrap_or(0);
    for n in &d.nodes {
        if n.description.is_empty() {
            println!("  {}", n.name);
        } else {
            println!("  {:<width$}  {}", n.name, n.description);
        }
    }
    println!();
    println!("edges:");
    for e in &d.edges {
        let cond = if e.conditional { "  (conditional)" } else { "" };
        println!("  {} → {}{cond}", e.source, e.target);
    }
    if !d.mermaid.is_empty() {
        println!();
        println!("mermaid:");
        println!("{}", d.mermaid.trim_end());
    }
    Ok(())
}

async fn conversation(client: &Client, cmd: ConversationCommand) -> Result<(), CliError> {
    match cmd {
        ConversationCommand::Start { workflow, id } => {
            let resp = client
                .start_conversation(&workflow, StartOptions { conversation_id: id, idempotency_key: None })
                .await?;
            let c = resp.conversation.unwrap_or_default();
            println!("{}", c.conversation_id);
            if let Some(w) = &resp.welcome {
                println!("assistant: {}", w.text);
            }
        }
        ConversationCommand::Show { id } => {
            let resp = client.get_conversation(&id).await?;
            print_state(&resp.conversation.unwrap_or_default());
            println!();
            println!("messages ({}):", resp.messages.len());
            for m in &resp.messages {
                print!("  ");
                print_message(m);
            }
        }
        ConversationCommand::List { workflow, page_size, page_token, all } => {
            let workflow = workflow.as_deref();
            let page = |token| async move {
                let resp = client.list_conversations(workflow, page_size, token).await?;
                Ok::<_, CliError>((resp.conversations, resp.next_page_token))
            };
            if print_pages(CONVERSATION_HEADER, 0, all, page_token, page, conversation_row).await? == 0 {
                println!("no conversations");
            }
        }
        ConversationCommand::Reset { id } => {
            let c = client.reset_conversation(&id, None).await?;
            println!("reset {id}: {}", state_summary(&c));
        }
        ConversationCommand::Delete { id } => {
            client.delete_conversation(&id).await?;
            println!("deleted {id}");
        }
    }
    Ok(())
}

/// Prints a paged listing as a table: `header` above the first row (unless `shown` rows were
/// printed above it already), a line a row, then with `all` every further page, otherwise the
/// token of the next one. Returns the rows printed, `shown` included.
async fn print_pages<T, F, Fut>(
    header: &str,
    mut shown: usize,
    all: bool,
    mut token: Option<String>,
    mut page: F,
    row: fn(&T) -> String,
) -> Result<usize, CliError>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<(Vec<T>, String), CliError>>,
{
    loop {
        let (rows, next) = page(token.take()).await?;
        if shown == 0 && !rows.is_empty() {
            println!("{header}");
        }
        for r in &rows {
            println!("{}", row(r));
        }
        shown += rows.len();
        if next.is_empty() {
            return Ok(shown);
        }
        if !all {
            println!("more: --page-token {next}");
            return Ok(shown);
        }
        token = Some(next);
    }
}

const CONVERSATION_HEADER: &str = "ID                                    WORKFLOW      TURNS  MODE            UPDATED";

fn conversation_row(c: &v1::Conversation) -> String {
    format!(
        "{:<36}  {:<12}  {:>5}  {:<14}  {}",
        c.conversation_id,
        c.workflow,
        c.turn_count,
        conversation_mode(c),
        timestamp(c.update_time.as_ref())
    )
}

const TICKET_HEADER: &str =
    "ID            STATUS     TYPE       URGENCY   ACTION            UPDATED               SUBJECT";

fn ticket_row(t: &v1::Ticket) -> String {
    format!(
        "{:<12}  {:<9}  {:<9}  {:<8}  {:<16}  {:<20}  {}",
        t.ticket_id,
        status_name(t.status),
        ticket_type_name(t.ticket_type),
        urgency_name(t.urgency),
        action_name(t.recommended_action),
        timestamp(t.update_time.as_ref()),
        if t.subject.is_empty() { "-" } else { &t.subject }
    )
}

async fn list_tickets(
    client: &Client,
    customer: &str,
    status: Option<StatusArg>,
    page_size: i32,
    page_token: Option<String>,
    all: bool,
) -> Result<(), CliError> {
    let mut shown = 0usize;
    // Active tickets are unpaged: listed with the first page only.
    if matches!(status, None | Some(StatusArg::Active)) && page_token.is_none() {
        let active = client.list_active_tickets(customer).await?;
        if !active.is_empty() {
            println!("{TICKET_HEADER}");
        }
        for t in &active {
            println!("{}", ticket_row(t));
        }
        shown += active.len();
    }
    if status != Some(StatusArg::Active) {
        let archived = match status {
            Some(StatusArg::Resolved) => Some(v1::TicketStatus::Resolved),
            Some(StatusArg::Escalated) => Some(v1::TicketStatus::Escalated),
            _ => None,
        };
        let page = |token| async move {
            let resp = client.list_tickets(customer, archived, page_size, token).await?;
            Ok::<_, CliError>((resp.tickets, resp.next_page_token))
        };
        shown = print_pages(TICKET_HEADER, shown, all, page_token, page, ticket_row).await?;
    }
    if shown == 0 {
        println!("no tickets");
    }
    Ok(())
}

fn ticket_role(role: i32) -> &'static str {
    match v1::Role::try_from(role) {
        Ok(v1::Role::User) => "customer",
        Ok(v1::Role::Assistant) => "support",
        Ok(v1::Role::System) => "system",
        _ => "unknown",
    }
}

async fn show_ticket(client: &Client, customer: &str, ticket_id: &str) -> Result<(), CliError> {
    let resp = client.get_ticket(customer, ticket_id).await?;
    let t = resp.ticket.unwrap_or_default();
    println!("ticket:   {}", if t.ticket_id.is_empty() { ticket_id } else { &t.ticket_id });
    println!("customer: {}", if t.customer_id.is_empty() { customer } else { &t.customer_id });
    println!("status:   {}", status_name(t.status));
    println!("subject:  {}", if t.subject.is_empty() { "-" } else { &t.subject });
    println!("type:     {}", ticket_type_name(t.ticket_type));
    println!("urgency:  {}", urgency_name(t.urgency));
    println!("action:   {}", action_name(t.recommended_action));
    println!("created:  {}", timestamp(t.create_time.as_ref()));
    println!("updated:  {}", timestamp(t.update_time.as_ref()));
    println!();
    println!("messages ({}):", resp.messages.len());
    for m in &resp.messages {
        println!("  [{}] {}: {}", timestamp(m.create_time.as_ref()), ticket_role(m.role), m.text);
        if !m.english_text.is_empty() && m.english_text.trim() != m.text.trim() {
            println!("      (English: {})", m.english_text);
        }
    }
    if let Some(r) = &resp.result {
        println!();
        println!("latest triage:");
        let mut out = std::io::stdout().lock();
        let mut block = Vec::new();
        write_triage_result(&mut block, r)?;
        for line in String::from_utf8_lossy(&block).lines() {
            writeln!(out, "  {line}")?;
        }
        if !r.run_id.is_empty() {
            writeln!(out, "  run:      {}", r.run_id)?;
        }
        out.flush()?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Investigations

fn investigation_status_name(v: i32) -> String {
    enum_label(v1::InvestigationStatus::try_from(v).ok().map(|e| e.as_str_name()), "INVESTIGATION_STATUS_")
}

fn responder_role_name(v: i32) -> String {
    enum_label(v1::ResponderRole::try_from(v).ok().map(|e| e.as_str_name()), "RESPONDER_ROLE_")
}

fn decision_name(v: i32) -> String {
    enum_label(v1::ManagerDecision::try_from(v).ok().map(|e| e.as_str_name()), "MANAGER_DECISION_")
}

fn recommendation_name(v: i32) -> String {
    enum_label(v1::Recommendation::try_from(v).ok().map(|e| e.as_str_name()), "RECOMMENDATION_")
}

fn agent_name(v: i32) -> String {
    enum_label(v1::Agent::try_from(v).ok().map(|e| e.as_str_name()), "AGENT_")
}

fn pending_status_name(v: i32) -> String {
    enum_label(v1::PendingActionStatus::try_from(v).ok().map(|e| e.as_str_name()), "PENDING_ACTION_STATUS_")
}

fn dash(s: &str) -> &str {
    if s.trim().is_empty() {
        "-"
    } else {
        s
    }
}

/// `1002 · changer u003 · target u005 · Payroll Write · salary_change · changed 2026-05-03T09:00:00Z`
/// (empty parts left out).
fn mutation_summary(m: &v1::HrMutation) -> String {
    let mut parts = vec![dash(&m.mutation_id).to_string()];
    if !m.changer_id.is_empty() {
        parts.push(format!("changer {}", m.changer_id));
    }
    if !m.target_user_id.is_empty() {
        parts.push(format!("target {}", m.target_user_id));
    }
    let access =
        [m.system.as_str(), m.access_level.as_str()].iter().filter(|p| !p.is_empty()).copied().collect::<Vec<_>>();
    if !access.is_empty() {
        parts.push(access.join(" "));
    }
    if !m.change_type.is_empty() {
        parts.push(m.change_type.clone());
    }
    if m.changed_at.is_some() {
        parts.push(format!("changed {}", timestamp(m.changed_at.as_ref())));
    }
    parts.join(" · ")
}

/// The command that answers a pending action (the values a person fills in in capitals).
fn respond_hint(investigation_id: &str, a: &v1::PendingAction) -> String {
    let investigation = if a.investigation_id.is_empty() { investigation_id } else { &a.investigation_id };
    let reply = match v1::ResponderRole::try_from(a.recipient_role) {
        Ok(v1::ResponderRole::Manager) => "--as manager --responder {who} --approve|--deny [--text COMMENT]",
        _ => "--as changer --responder {who} --text TEXT",
    };
    format!(
        "frontdesk investigate respond {investigation} {} {}",
        a.action_id,
        reply.replace("{who}", dash(&a.recipient_id))
    )
}

/// An investigation, readably: mutation, status, the actions it awaits (with the command that
/// answers each), findings and report. `full` adds the mutation's description, the report's
/// details, the rights-check evidence, the status history and the timestamps.
fn write_investigation(out: &mut impl Write, inv: &v1::Investigation, full: bool) -> std::io::Result<()> {
    writeln!(out, "investigation: {}", dash(&inv.investigation_id))?;
    if let Some(m) = &inv.mutation {
        writeln!(out, "mutation:      {}", mutation_summary(m))?;
        if full && !m.description.trim().is_empty() {
            writeln!(out, "description:   {}", m.description.trim())?;
        }
    }
    let finished = if inv.finished { " (finished)" } else { "" };
    writeln!(out, "status:        {}{finished}", investigation_status_name(inv.status))?;
    if inv.awaiting.is_empty() {
        if !inv.finished {
            writeln!(out, "awaiting:      nothing")?;
        }
    } else {
        writeln!(out, "awaiting:")?;
        for a in &inv.awaiting {
            writeln!(
                out,
                "  {}  {} {}: {}",
                a.action_id,
                responder_role_name(a.recipient_role),
                dash(&a.recipient_id),
                dash(a.subject.trim())
            )?;
            writeln!(out, "    answer: {}", respond_hint(&inv.investigation_id, a))?;
        }
    }
    if let Some(r) = &inv.rights_check {
        let verdict = if r.authorized { "authorised" } else { "not authorised" };
        if r.message.trim().is_empty() {
            writeln!(out, "rights check:  {verdict}")?;
        } else {
            writeln!(out, "rights check:  {verdict}: {}", r.message.trim())?;
        }
        if full && !r.evidence_json.trim().is_empty() {
            writeln!(out, "  evidence: {}", compact_json(&r.evidence_json))?;
        }
    }
    if let Some(c) = &inv.claim {
        let mut parts = vec![if c.valid { "valid".to_string() } else { "invalid".to_string() }];
        if !c.covered_user_id.is_empty() {
            parts.push(format!("stood in for {}", c.covered_user_id));
        }
        if !c.absence.is_empty() && c.absence != "none" {
            parts.push(c.absence.replace('_', " "));
        }
        writeln!(out, "claim:         {}", parts.join(" · "))?;
        if !c.explanation.trim().is_empty() {
            writeln!(out, "  {}", c.explanation.trim())?;
        }
        if full && !c.reply.trim().is_empty() {
            print_block(out, "  changer's reply:", &format!("  {}", c.reply.trim()))?;
        }
    }
    if let Some(m) = &inv.manager {
        let comment = if m.comment.trim().is_empty() { String::new() } else { format!(": {}", m.comment.trim()) };
        writeln!(out, "manager:       {} {}{comment}", dash(&m.manager_id), decision_name(m.decision))?;
    }
    match &inv.report {
        Some(r) => {
            writeln!(
                out,
                "report:        {} · recommendation {}",
                dash(&r.report_id),
                recommendation_name(r.recommendation)
            )?;
            if !r.summary.trim().is_empty() {
                for line in r.summary.trim().lines() {
                    writeln!(out, "  {line}")?;
                }
            }
            if full && !r.details.trim().is_empty() {
                print_block(out, "report details:", &r.details)?;
            }
        }
        None => writeln!(out, "report:        -")?,
    }
    if full {
        if !inv.status_history.is_empty() {
            writeln!(out, "status history:")?;
            for c in &inv.status_history {
                writeln!(
                    out,
                    "  {}  {} -> {}  ({})",
                    timestamp(c.time.as_ref()),
                    investigation_status_name(c.from),
                    investigation_status_name(c.to),
                    agent_name(c.agent)
                )?;
            }
        }
        writeln!(out, "created:       {}", timestamp(inv.created_at.as_ref()))?;
        writeln!(out, "updated:       {}", timestamp(inv.updated_at.as_ref()))?;
    }
    Ok(())
}

/// Compact one-line JSON (or the text with its whitespace collapsed when it is not JSON).
fn compact_json(s: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(s) {
        Ok(v) => v.to_string(),
        Err(_) => s.split_whitespace().collect::<Vec<_>>().join(" "),
    }
}

const INVESTIGATION_HEADER: &str =
    "ID              MUTATION  STATUS                          UPDATED               REPORT               AWAITING";

fn investigation_row(inv: &v1::Investigation) -> String {
    let mutation = inv.mutation.as_ref().map(|m| m.mutation_id.as_str()).unwrap_or_default();
    let report = inv.report.as_ref().map(|r| recommendation_name(r.recommendation)).unwrap_or_else(|| "-".into());
    let awaiting: Vec<String> =
        inv.awaiting.iter().map(|a| format!("{} ({})", a.action_id, dash(&a.recipient_id))).collect();
    format!(
        "{:<14}  {:<8}  {:<30}  {:<20}  {:<19}  {}",
        dash(&inv.investigation_id),
        dash(mutation),
        investigation_status_name(inv.status),
        timestamp(inv.updated_at.as_ref()),
        report,
        if awaiting.is_empty() { "-".to_string() } else { awaiting.join(", ") }
    )
}

/// The columns of `frontdesk investigate audit` and `watch` (the actor is an agent, such as
/// `RequestForInformationAgent`, or a person, such as `changer:u003`).
fn audit_columns(seq: &str, time: &str, correlation: &str, actor: &str, kind: &str, summary: &str) -> String {
    format!("{seq:>3}  {time:<20}  {correlation:<18}  {actor:<26}  {kind:<13}  {summary}")
}

fn audit_header() -> String {
    audit_columns("SEQ", "TIME", "CORRELATION", "ACTOR", "KIND", "SUMMARY")
}

/// One audit entry as a row of `frontdesk investigate audit` and `watch`.
fn audit_row(e: &v1::AuditEntry) -> String {
    audit_columns(
        &e.seq.to_string(),
        &timestamp(e.time.as_ref()),
        dash(&e.correlation_id),
        dash(&e.actor),
        audit_entry_kind(e),
        &describe_audit_entry(e),
    )
}

/// A CSV field: quoted (quotes doubled) when it holds a comma, a quote or a line break.
fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

const AUDIT_CSV_HEADER: &str = "seq,time,correlation_id,actor,kind,summary";

/// The audit trail as CSV: a header, then one line per entry (time in RFC 3339, empty when
/// unknown).
fn write_audit_csv(out: &mut impl Write, entries: &[v1::AuditEntry]) -> std::io::Result<()> {
    writeln!(out, "{AUDIT_CSV_HEADER}")?;
    for e in entries {
        let time = e.time.as_ref().map(|t| t.to_string()).unwrap_or_default();
        writeln!(
            out,
            "{},{},{},{},{},{}",
            e.seq,
            csv_field(&time),
            csv_field(&e.correlation_id),
            csv_field(&e.actor),
            audit_entry_kind(e),
            csv_field(&describe_audit_entry(e))
        )?;
    }
    Ok(())
}

const PENDING_HEADER: &str =
    "ACTION              INVESTIGATION   RECIPIENT  ROLE     STATUS    CREATED               SUBJECT";

/// A pending action as a row of `frontdesk investigate pending`, with its reply on a second line
/// once answered.
fn write_pending_action(out: &mut impl Write, a: &v1::PendingAction) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<18}  {:<14}  {:<9}  {:<7}  {:<8}  {:<20}  {}",
        dash(&a.action_id),
        dash(&a.investigation_id),
        dash(&a.recipient_id),
        responder_role_name(a.recipient_role),
        pending_status_name(a.status),
        timestamp(a.created_at.as_ref()),
        dash(a.subject.trim())
    )?;
    if a.answered_at.is_some() || !a.reply_json.is_empty() {
        let reply = if a.reply_json.is_empty() { "-".to_string() } else { compact_json(&a.reply_json) };
        writeln!(out, "    answered {}: {reply}", timestamp(a.answered_at.as_ref()))?;
    }
    Ok(())
}

/// The columns of `frontdesk llm-calls`, header and rows alike: time, run, node, purpose, model,
/// latency, tokens, status.
fn llm_call_columns([time, run, node, purpose, model, latency, tokens, status]: [&str; 8]) -> String {
    format!("{time:<20}  {run:<12}  {node:<18}  {purpose:<24}  {model:<18}  {latency:>7}  {tokens:<12}  {status}")
}

fn llm_call_header() -> String {
    llm_call_columns(["TIME", "RUN", "NODE", "PURPOSE", "MODEL", "LATENCY", "TOKENS", "STATUS"])
}

/// A model call as a row of `frontdesk llm-calls`.
fn llm_call_row(c: &v1::LlmCall) -> String {
    let latency = c
        .latency
        .and_then(|d| std::time::Duration::try_from(d).ok())
        .map(format_duration)
        .unwrap_or_else(|| "-".to_string());
    // Run ids are UUIDv7: their first groups are a timestamp, the same for runs made within a
    // minute or so; the last group is random, which tells runs apart.
    let run = c.run_id.rsplit('-').next().unwrap_or_default();
    let status = match (c.error.trim(), c.attempts) {
        ("", 0 | 1) => "ok".to_string(),
        ("", n) => format!("ok ({n} attempts)"),
        (e, 0 | 1) => format!("failed: {e}"),
        (e, n) => format!("failed after {n} attempts: {e}"),
    };
    llm_call_columns([
        &timestamp(c.time.as_ref()),
        dash(run),
        dash(&c.node),
        dash(&c.purpose),
        dash(&c.model),
        &latency,
        &format!("{}+{}", c.prompt_tokens, c.completion_tokens),
        &status,
    ])
}

/// Writes `text` after `label`, its further lines indented under the first.
fn write_labelled(out: &mut impl Write, label: &str, text: &str) -> std::io::Result<()> {
    let mut lines = text.trim_end().lines();
    writeln!(out, "    {label}: {}", lines.next().unwrap_or_default())?;
    for line in lines {
        writeln!(out, "      {line}")?;
    }
    Ok(())
}

/// A call's prompt messages and reply under its row: each message as `role: content` and the
/// reply's text and tool calls when the log holds them in full; their roles and character
/// counts when it holds them redacted (`{"role", "chars"}`).
fn write_llm_call_prompts(out: &mut impl Write, c: &v1::LlmCall) -> std::io::Result<()> {
    use serde_json::Value;
    let chars = |v: &Value| v.get("chars").and_then(Value::as_u64);
    match serde_json::from_str::<Value>(&c.prompt_json) {
        Ok(Value::Array(messages)) if messages.iter().all(|m| m.get("content").is_some()) => {
            for m in &messages {
                let role = m.get("role").and_then(Value::as_str).unwrap_or("?");
                write_labelled(out, role, m["content"].as_str().unwrap_or_default())?;
            }
        }
        Ok(Value::Array(messages)) => {
            let sizes: Vec<String> = messages
                .iter()
                .map(|m| {
                    let role = m.get("role").and_then(Value::as_str).unwrap_or("?");
                    chars(m).map_or_else(|| role.to_string(), |n| format!("{role} {n} chars"))
                })
                .collect();
            writeln!(
                out,
                "    prompt (redacted): {}",
                if sizes.is_empty() { "-".to_string() } else { sizes.join(", ") }
            )?;
        }
        _ => write_labelled(out, "prompt", &compact_json(&c.prompt_json))?,
    }
    let tool_calls = |reply: &Value| -> Vec<Value> {
        reply.get("tool_calls").and_then(Value::as_array).cloned().unwrap_or_default()
    };
    match serde_json::from_str::<Value>(&c.response_json) {
        Ok(Value::Null) => writeln!(out, "    reply: none (the call failed)")?,
        Ok(reply) if reply.get("content").is_some() => {
            let content = reply["content"].as_str().unwrap_or_default();
            if !content.trim().is_empty() || tool_calls(&reply).is_empty() {
                write_labelled(out, "reply", content)?;
            }
            for t in tool_calls(&reply) {
                let name = t.get("name").and_then(Value::as_str).unwrap_or("?");
                let args = t.get("arguments").and_then(Value::as_str).unwrap_or_default();
                writeln!(out, "    tool call: {name}({})", compact_json(args))?;
            }
        }
        Ok(reply) if chars(&reply).is_some() => {
            let mut parts = vec![format!("{} chars", chars(&reply).unwrap_or_default())];
            for t in tool_calls(&reply) {
                let name = t.get("name").and_then(Value::as_str).unwrap_or("?");
                parts.push(format!("tool call {name} ({} chars)", chars(&t).unwrap_or_default()));
            }
            writeln!(out, "    reply (redacted): {}", parts.join(", "))?;
        }
        _ => write_labelled(out, "reply", &compact_json(&c.response_json))?,
    }
    Ok(())
}

/// `frontdesk llm-calls`: every page of the thread's calls (the server lists the most recent
/// first), the run's alone with `run`, printed oldest first, so that they read in the order the
/// workflow made them.
async fn list_llm_calls(
    client: &Client,
    thread: &str,
    run: Option<&str>,
    prompts: bool,
    page_size: i32,
) -> Result<(), CliError> {
    let mut calls = Vec::new();
    let mut thread_calls;
    let mut token = None;
    loop {
        let page = client.list_llm_calls(thread, page_size, token).await?;
        thread_calls = page.total_calls;
        calls.extend(page.calls.into_iter().filter(|c| run.is_none_or(|r| c.run_id.contains(r))));
        if page.next_page_token.is_empty() {
            break;
        }
        token = Some(page.next_page_token);
    }
    calls.reverse();
    let mut out = std::io::stdout().lock();
    if calls.is_empty() {
        match run {
            Some(r) => writeln!(out, "no calls of run {r} among the {thread_calls} recorded calls of {thread}")?,
            // A known thread with no calls: most likely the log was off (model.call_log).
            None => writeln!(out, "no recorded calls for {thread} (the server records them with model.call_log = \"redacted\" or \"full\")")?,
        }
        out.flush()?;
        return Ok(());
    }
    writeln!(out, "{}", llm_call_header())?;
    for c in &calls {
        writeln!(out, "{}", llm_call_row(c))?;
        if prompts {
            write_llm_call_prompts(&mut out, c)?;
        }
    }
    let (prompt, completion) = calls.iter().fold((0, 0), |(p, k), c| (p + c.prompt_tokens, k + c.completion_tokens));
    let cost: f64 = calls.iter().map(|c| c.cost_usd).sum();
    let failed = calls.iter().filter(|c| !c.error.trim().is_empty()).count();
    let mut total = format!("{} calls, {prompt}+{completion} tokens", calls.len());
    if cost > 0.0 {
        total.push_str(&format!(", ${cost:.4}"));
    }
    if failed > 0 {
        total.push_str(&format!(", {failed} failed"));
    }
    if run.is_some() {
        total.push_str(&format!(" (of the thread's {thread_calls})"));
    }
    writeln!(out, "total: {total}")?;
    out.flush()?;
    Ok(())
}

async fn investigate(client: &Client, cmd: InvestigateCommand) -> Result<(), CliError> {
    match cmd {
        InvestigateCommand::Start { mutation_id, key, quiet_events } => {
            let stream = client.start_investigation(mutation_id, key).await?;
            Printer::new(quiet_events).investigation(stream).await?;
        }
        InvestigateCommand::Respond {
            investigation_id,
            action_id,
            role,
            responder,
            text,
            approve,
            deny,
            key,
            quiet_events,
        } => {
            let reply = build_reply(role, responder, text, approve, deny, key);
            let stream = client.respond(&investigation_id, &action_id, reply).await?;
            Printer::new(quiet_events).investigation(stream).await?;
        }
        InvestigateCommand::Show { investigation_id } => {
            let inv = client.get_investigation(&investigation_id).await?;
            let mut out = std::io::stdout().lock();
            write_investigation(&mut out, &inv, true)?;
            out.flush()?;
        }
        InvestigateCommand::List { status, page_size, page_token, all } => {
            let page = |token| async move {
                let resp = client.list_investigations(status, page_size, token).await?;
                Ok::<_, CliError>((resp.investigations, resp.next_page_token))
            };
            if print_pages(INVESTIGATION_HEADER, 0, all, page_token, page, investigation_row).await? == 0 {
                println!("no investigations");
            }
        }
        InvestigateCommand::Audit { investigation_id, correlation, csv } => {
            let key = match (investigation_id, correlation) {
                (_, Some(c)) => AuditTrailKey::Correlation(c),
                (Some(id), None) => AuditTrailKey::Investigation(id),
                // clap requires one of the two.
                (None, None) => unreachable!("an investigation id or --correlation is required"),
            };
            let entries = client.get_audit_trail(key).await?;
            let mut out = std::io::stdout().lock();
            if csv {
                write_audit_csv(&mut out, &entries)?;
            } else if entries.is_empty() {
                writeln!(out, "no audit entries")?;
            } else {
                writeln!(out, "{}", audit_header())?;
                for e in &entries {
                    writeln!(out, "{}", audit_row(e))?;
                }
            }
            out.flush()?;
        }
        InvestigateCommand::Pending { recipient, answered } => {
            let status = if answered { v1::PendingActionStatus::Answered } else { v1::PendingActionStatus::Awaiting };
            // Every page: the listing was never cut short, and an operator reads it whole.
            let mut actions = Vec::new();
            let mut token = None;
            loop {
                let page = client.list_pending_actions(recipient.as_deref(), Some(status), 100, token).await?;
                actions.extend(page.actions);
                if page.next_page_token.is_empty() {
                    break;
                }
                token = Some(page.next_page_token);
            }
            let mut out = std::io::stdout().lock();
            if actions.is_empty() {
                let what = if answered { "no answered actions" } else { "no pending actions" };
                writeln!(out, "{what}")?;
            } else {
                writeln!(out, "{PENDING_HEADER}")?;
                for a in &actions {
                    write_pending_action(&mut out, a)?;
                }
            }
            out.flush()?;
        }
        InvestigateCommand::Watch { investigation_id, after } => {
            let mut stream = client.watch_investigation(&investigation_id, after).await?;
            println!("{}", audit_header());
            let mut last = after;
            while let Some(entry) = stream.next().await {
                let entry = entry?;
                last = last.max(entry.seq);
                let mut out = std::io::stdout().lock();
                writeln!(out, "{}", audit_row(&entry))?;
                out.flush()?;
            }
            println!("watch ended after seq {last}");
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Research

/// A plan: `plan (attempt N):`, then each research step (`  research ID: step`, numbered by the
/// step ids its results carry) and each expert step.
fn write_plan(out: &mut impl Write, p: &v1::Plan) -> std::io::Result<()> {
    writeln!(out, "plan (attempt {}):", p.attempt)?;
    if p.research_steps.is_empty() {
        writeln!(out, "  research: none")?;
    }
    for (i, step) in p.research_steps.iter().enumerate() {
        writeln!(out, "  research {i}: {}", step.trim())?;
    }
    for (i, step) in p.expert_steps.iter().enumerate() {
        writeln!(out, "  expert {i}: {}", step.trim())?;
    }
    Ok(())
}

/// A research result: `result [step N] STEP (attempt K):`, the answer indented, then each
/// citation as `  [document_id#passage] title`.
fn write_research_result(out: &mut impl Write, r: &v1::ResearchResult) -> std::io::Result<()> {
    writeln!(out, "result [step {}] {} (attempt {}):", r.step_id, dash(r.step.trim()), r.attempt)?;
    for line in r.answer.trim().lines().filter(|l| !l.trim().is_empty()) {
        writeln!(out, "  {}", line.trim_end())?;
    }
    if r.citations.is_empty() {
        writeln!(out, "  (no citations)")?;
    }
    for c in &r.citations {
        writeln!(out, "  {}", describe_citation(c))?;
    }
    Ok(())
}

/// The expert's answer: `expert answer (attempt K):`, the answer, then its reasoning, indented.
fn write_expert_answer(out: &mut impl Write, e: &v1::ExpertAnswer) -> std::io::Result<()> {
    writeln!(out, "expert answer (attempt {}):", e.attempt)?;
    for line in e.answer.trim().lines() {
        writeln!(out, "  {line}")?;
    }
    if !e.reasoning.trim().is_empty() {
        writeln!(out, "  reasoning:")?;
        for line in e.reasoning.trim().lines() {
            writeln!(out, "    {line}")?;
        }
    }
    Ok(())
}

/// `answered (retries 0 of 5)`, `retry_limit (retries 5 of 5)`, `failed in researcher (retries 1 of 5)`.
fn outcome_summary(r: &v1::Research) -> String {
    let mut out = research_outcome_label(r.outcome);
    if !r.error_component.is_empty() {
        out.push_str(&format!(" in {}", r.error_component));
    }
    out.push_str(&format!(" (retries {} of {})", r.retry_count, r.retry_limit));
    out
}

/// A research, readably: id, question, outcome, error, the final answer and the reasoning trace.
/// `full` adds the corpus, the current step, the plan, the results with their citations, the
/// expert's answer, the orchestrator's messages and the timestamps.
fn write_research(out: &mut impl Write, r: &v1::Research, full: bool) -> std::io::Result<()> {
    writeln!(out, "research: {}", dash(&r.research_id))?;
    writeln!(out, "question: {}", dash(r.question.trim()))?;
    if full {
        writeln!(out, "corpus:   {}", dash(&r.corpus))?;
        writeln!(out, "step:     {}", research_step_label(r.current_step))?;
    }
    writeln!(out, "outcome:  {}", outcome_summary(r))?;
    if !r.error.trim().is_empty() {
        writeln!(out, "error:    {}", r.error.trim())?;
    }
    if full {
        if let Some(p) = &r.plan {
            write_plan(out, p)?;
        }
        for result in &r.results {
            write_research_result(out, result)?;
        }
        if let Some(e) = &r.expert {
            write_expert_answer(out, e)?;
        }
    }
    if r.final_answer.trim().is_empty() {
        writeln!(out, "final answer: -")?;
    } else {
        print_block(out, "final answer:", r.final_answer.trim())?;
    }
    if r.final_reasoning_trace.trim().is_empty() {
        writeln!(out, "reasoning trace: -")?;
    } else {
        print_block(out, "reasoning trace:", r.final_reasoning_trace.trim())?;
    }
    if full {
        if !r.messages.is_empty() {
            writeln!(out, "messages ({}):", r.messages.len())?;
            for m in &r.messages {
                writeln!(out, "  {}", describe_orchestrator_message(m))?;
            }
        }
        writeln!(out, "created:  {}", timestamp(r.created_at.as_ref()))?;
        writeln!(out, "updated:  {}", timestamp(r.updated_at.as_ref()))?;
    }
    Ok(())
}

const RESEARCH_HEADER: &str =
    "ID                                    OUTCOME      RETRIES  UPDATED               QUESTION";

/// A research as a row of `frontdesk research list` (the question on one line, cut to 80
/// characters).
fn research_row(r: &v1::Research) -> String {
    let question = r.question.split_whitespace().collect::<Vec<_>>().join(" ");
    let question = if question.chars().count() > 80 {
        format!("{}…", question.chars().take(79).collect::<String>())
    } else {
        question
    };
    format!(
        "{:<36}  {:<11}  {:>7}  {:<20}  {}",
        dash(&r.research_id),
        research_outcome_label(r.outcome),
        format!("{}/{}", r.retry_count, r.retry_limit),
        timestamp(r.updated_at.as_ref()),
        dash(&question)
    )
}

async fn research(client: &Client, cmd: ResearchCommand) -> Result<(), CliError> {
    match cmd {
        ResearchCommand::Show { research_id } => {
            let r = client.get_research(&research_id).await?;
            let mut out = std::io::stdout().lock();
            write_research(&mut out, &r, true)?;
            out.flush()?;
        }
        ResearchCommand::List { page_size, page_token, all } => {
            let page = |token| async move {
                let resp = client.list_research(page_size, token).await?;
                Ok::<_, CliError>((resp.research, resp.next_page_token))
            };
            if print_pages(RESEARCH_HEADER, 0, all, page_token, page, research_row).await? == 0 {
                println!("no research");
            }
        }
    }
    Ok(())
}

const CHAT_HELP: &str =
    "commands: /show (state), /history (messages), /reset, /quit — anything else is sent as a message";

async fn chat(
    client: &Client,
    workflow: &str,
    conversation: Option<String>,
    turn: &TurnArgs,
) -> Result<ExitCode, CliError> {
    let interactive = std::io::stdin().is_terminal();
    let id = match conversation {
        Some(id) => match client.get_conversation(&id).await {
            Ok(resp) => {
                let c = resp.conversation.unwrap_or_default();
                println!("conversation: {} (workflow {}, turns: {}, continuing)", id, c.workflow, c.turn_count);
                if let Some(last) = resp.messages.iter().rev().find(|m| m.role == v1::Role::Assistant as i32) {
                    println!("assistant: {}", last.text);
                }
                if let Some(s) = service_call_state(&c) {
                    if s.call_ended {
                        println!("the call has ended: it takes no more messages");
                        return Ok(ExitCode::SUCCESS);
                    }
                    println!("current node: {}", s.current_node);
                }
                id
            }
            Err(e) if e.code() == Some(tonic::Code::NotFound) => start_chat(client, workflow, Some(id)).await?,
            Err(e) => return Err(e.into()),
        },
        None => start_chat(client, workflow, None).await?,
    };
    if interactive {
        println!("{CHAT_HELP}");
    }

    let mut printer = Printer::new(turn.quiet_events);
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut failed = false;
    loop {
        if interactive {
            print!("you> ");
            std::io::stdout().flush()?;
        }
        let Some(line) = lines.next_line().await? else {
            if interactive {
                println!();
            }
            break;
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if !interactive {
            println!("you> {line}");
        }
        let outcome = match line {
            "/quit" | "/exit" | "/q" => break,
            "/help" | "/?" => {
                println!("{CHAT_HELP}");
                Ok(())
            }
            "/show" => match client.get_conversation(&id).await {
                Ok(resp) => {
                    print_state(&resp.conversation.unwrap_or_default());
                    Ok(())
                }
                Err(e) => Err(e.into()),
            },
            "/history" => match client.get_conversation(&id).await {
                Ok(resp) => {
                    for m in &resp.messages {
                        print_message(m);
                    }
                    Ok(())
                }
                Err(e) => Err(e.into()),
            },
            "/reset" => match client.reset_conversation(&id, None).await {
                Ok(c) => {
                    println!("conversation reset: {}", state_summary(&c));
                    Ok(())
                }
                Err(e) => Err(e.into()),
            },
            text => {
                let opts = SendOptions { idempotency_key: None, queue_if_busy: turn.queue };
                match printer.turn(client, &id, text, opts).await {
                    Ok(result) if call_ended(&result) => {
                        println!("the call has ended");
                        break;
                    }
                    Ok(_) => Ok(()),
                    // The call was hung up (in another session, or before this one continued it).
                    Err(e) if is_conversation_ended(&e) => {
                        println!("the call has ended: it takes no more messages");
                        break;
                    }
                    Err(e) => Err(e),
                }
            }
        };
        if let Err(e) = outcome {
            print_error(&e);
            failed = true;
        }
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

async fn start_chat(client: &Client, workflow: &str, id: Option<String>) -> Result<String, CliError> {
    let resp = client.start_conversation(workflow, StartOptions { conversation_id: id, idempotency_key: None }).await?;
    let c = resp.conversation.unwrap_or_default();
    println!("conversation: {} (workflow {})", c.conversation_id, c.workflow);
    if let Some(w) = &resp.welcome {
        println!("assistant: {}", w.text);
    }
    if let Some(s) = service_call_state(&c) {
        println!("current node: {}", s.current_node);
    }
    Ok(c.conversation_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// The command line `frontdesk ARGS`, parsed.
    fn cli(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("frontdesk").chain(args.iter().copied()))
    }

    fn parse(args: &[&str]) -> Result<InvestigateCommand, clap::Error> {
        match cli(args)?.command {
            Command::Investigate(cmd) => Ok(cmd),
            other => panic!("not an investigate command: {other:?}"),
        }
    }

    fn ts(seconds: i64) -> Option<prost_types::Timestamp> {
        Some(prost_types::Timestamp { seconds, nanos: 0 })
    }

    fn render(f: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> String {
        let mut out = Vec::new();
        f(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_cli_definition_is_valid() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_start_and_respond() {
        match parse(&["investigate", "start", "1002", "--key", "k1"]).unwrap() {
            InvestigateCommand::Start { mutation_id, key, quiet_events } => {
                assert_eq!((mutation_id.as_str(), key.as_deref(), quiet_events), ("1002", Some("k1"), false));
            }
            other => panic!("{other:?}"),
        }
        match parse(&["investigate", "start", "1003", "--idempotency-key", "k2", "--quiet-events"]).unwrap() {
            InvestigateCommand::Start { key, quiet_events, .. } => {
                assert_eq!((key.as_deref(), quiet_events), (Some("k2"), true))
            }
            other => panic!("{other:?}"),
        }

        let changer = [
            "investigate",
            "respond",
            "INV-1002",
            "INV-1002-changer",
            "--as",
            "changer",
            "--responder",
            "u003",
            "--text",
            "I stood in for u006",
        ];
        match parse(&changer).unwrap() {
            InvestigateCommand::Respond {
                investigation_id,
                action_id,
                role,
                responder,
                text,
                approve,
                deny,
                key,
                ..
            } => {
                assert_eq!((investigation_id.as_str(), action_id.as_str()), ("INV-1002", "INV-1002-changer"));
                assert_eq!(
                    (role, responder.as_str(), text.as_deref()),
                    (RoleArg::Changer, "u003", Some("I stood in for u006"))
                );
                let reply = build_reply(role, responder, text, approve, deny, key);
                assert_eq!(reply, Reply::changer("u003", "I stood in for u006"));
            }
            other => panic!("{other:?}"),
        }

        let manager =
            ["investigate", "respond", "INV-1002", "INV-1002-manager", "--as", "manager", "--responder", "u001"];
        let with = |extra: &[&str]| parse(&[&manager[..], extra].concat());
        match with(&["--deny", "--text", "not covered", "--key", "k3"]).unwrap() {
            InvestigateCommand::Respond { role, responder, text, approve, deny, key, .. } => {
                let reply = build_reply(role, responder, text, approve, deny, key);
                let expected = Reply::manager("u001", v1::ManagerDecision::Deny)
                    .with_text("not covered")
                    .with_idempotency_key("k3");
                assert_eq!(reply, expected);
            }
            other => panic!("{other:?}"),
        }
        match with(&["--approve"]).unwrap() {
            InvestigateCommand::Respond { role, responder, text, approve, deny, key, .. } => {
                assert_eq!(
                    build_reply(role, responder, text, approve, deny, key),
                    Reply::manager("u001", v1::ManagerDecision::Approve)
                );
            }
            other => panic!("{other:?}"),
        }
        // No decision: sent as such, the server says what is missing.
        match with(&[]).unwrap() {
            InvestigateCommand::Respond { role, responder, text, approve, deny, key, .. } => {
                assert_eq!(build_reply(role, responder, text, approve, deny, key).decision, None);
            }
            other => panic!("{other:?}"),
        }

        assert_eq!(with(&["--approve", "--deny"]).unwrap_err().kind(), clap::error::ErrorKind::ArgumentConflict);
        let no_role = ["investigate", "respond", "INV-1002", "INV-1002-changer", "--responder", "u003"];
        assert_eq!(parse(&no_role).unwrap_err().kind(), clap::error::ErrorKind::MissingRequiredArgument);
        let no_responder = ["investigate", "respond", "INV-1002", "INV-1002-changer", "--as", "changer"];
        assert_eq!(parse(&no_responder).unwrap_err().kind(), clap::error::ErrorKind::MissingRequiredArgument);
        let bad_role = ["investigate", "respond", "INV-1002", "A", "--as", "boss", "--responder", "u001"];
        assert_eq!(parse(&bad_role).unwrap_err().kind(), clap::error::ErrorKind::InvalidValue);
    }

    #[test]
    fn parses_the_inspection_commands() {
        assert!(matches!(
            parse(&["investigate", "show", "INV-1002"]).unwrap(),
            InvestigateCommand::Show { investigation_id } if investigation_id == "INV-1002"
        ));
        match parse(&["investigate", "list", "--status", "awaiting_user_response", "--all"]).unwrap() {
            InvestigateCommand::List { status, page_size, page_token, all } => {
                assert_eq!(
                    (status, page_size, page_token, all),
                    (Some(v1::InvestigationStatus::AwaitingUserResponse), 0, None, true)
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(parse(&["investigate", "list"]).unwrap(), InvestigateCommand::List { status: None, .. }));
        assert_eq!(
            parse(&["investigate", "list", "--status", "nope"]).unwrap_err().kind(),
            clap::error::ErrorKind::ValueValidation
        );

        match parse(&["investigate", "audit", "INV-1002", "--csv"]).unwrap() {
            InvestigateCommand::Audit { investigation_id, correlation, csv } => {
                assert_eq!((investigation_id.as_deref(), correlation, csv), (Some("INV-1002"), None, true));
            }
            other => panic!("{other:?}"),
        }
        match parse(&["investigate", "audit", "--correlation", "corr-INV-1002-1"]).unwrap() {
            InvestigateCommand::Audit { investigation_id, correlation, csv } => {
                assert_eq!((investigation_id, correlation.as_deref(), csv), (None, Some("corr-INV-1002-1"), false));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            parse(&["investigate", "audit"]).unwrap_err().kind(),
            clap::error::ErrorKind::MissingRequiredArgument
        );
        assert_eq!(
            parse(&["investigate", "audit", "INV-1002", "--correlation", "c"]).unwrap_err().kind(),
            clap::error::ErrorKind::ArgumentConflict
        );

        match parse(&["investigate", "pending", "--recipient", "u003", "--answered"]).unwrap() {
            InvestigateCommand::Pending { recipient, answered } => {
                assert_eq!((recipient.as_deref(), answered), (Some("u003"), true))
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(&["investigate", "pending"]).unwrap(),
            InvestigateCommand::Pending { recipient: None, answered: false }
        ));
        assert!(matches!(
            parse(&["investigate", "watch", "INV-1002", "--after", "7"]).unwrap(),
            InvestigateCommand::Watch { investigation_id, after: 7 } if investigation_id == "INV-1002"
        ));
        assert!(matches!(
            parse(&["investigate", "watch", "INV-1002"]).unwrap(),
            InvestigateCommand::Watch { after: 0, .. }
        ));
        assert_eq!(
            parse(&["investigate", "watch", "INV-1002", "--after", "-1"]).unwrap_err().kind(),
            clap::error::ErrorKind::UnknownArgument
        );
    }

    #[test]
    fn parses_statuses_in_every_spelling() {
        use v1::InvestigationStatus as S;
        for (text, status) in [
            ("awaiting_user_response", S::AwaitingUserResponse),
            ("awaiting-user-response", S::AwaitingUserResponse),
            ("AWAITING_USER_RESPONSE", S::AwaitingUserResponse),
            ("AwaitingUserResponse", S::AwaitingUserResponse),
            ("INVESTIGATION_STATUS_APPROVED", S::Approved),
            (" advisory_report_generated ", S::AdvisoryReportGenerated),
            ("pending", S::Pending),
        ] {
            assert_eq!(parse_investigation_status(text), Ok(status), "{text}");
        }
        for bad in ["", "unspecified", "INVESTIGATION_STATUS_UNSPECIFIED", "done"] {
            let err = parse_investigation_status(bad).unwrap_err();
            assert!(err.contains("one of: pending, investigation_started,"), "{err}");
        }
    }

    fn awaiting_investigation() -> v1::Investigation {
        v1::Investigation {
            investigation_id: "INV-1002".into(),
            mutation: Some(v1::HrMutation {
                mutation_id: "1002".into(),
                changer_id: "u003".into(),
                target_user_id: "u005".into(),
                system: "Payroll".into(),
                access_level: "Write".into(),
                change_type: "salary_change".into(),
                description: "Raised the salary of u005".into(),
                changed_at: ts(1_746_262_800),
                change_investigation: v1::InvestigationStatus::AwaitingUserResponse as i32,
            }),
            status: v1::InvestigationStatus::AwaitingUserResponse as i32,
            status_history: vec![
                v1::StatusChange {
                    from: 0,
                    to: v1::InvestigationStatus::Pending as i32,
                    time: ts(1_764_000_000),
                    agent: v1::Agent::Investigation as i32,
                },
                v1::StatusChange {
                    from: v1::InvestigationStatus::ClarificationRequested as i32,
                    to: v1::InvestigationStatus::AwaitingUserResponse as i32,
                    time: ts(1_764_000_005),
                    agent: v1::Agent::RequestForInformation as i32,
                },
            ],
            awaiting: vec![v1::PendingAction {
                action_id: "INV-1002-changer".into(),
                investigation_id: "INV-1002".into(),
                mutation_id: "1002".into(),
                recipient_id: "u003".into(),
                recipient_role: v1::ResponderRole::Changer as i32,
                subject: "Your change to Payroll".into(),
                status: v1::PendingActionStatus::Awaiting as i32,
                created_at: ts(1_764_000_005),
                ..Default::default()
            }],
            rights_check: Some(v1::RightsCheck {
                authorized: false,
                evidence_json: "{\n  \"grants\": []\n}".into(),
                message: "u003 holds Read on Payroll, the change needs Write.".into(),
            }),
            created_at: ts(1_764_000_000),
            updated_at: ts(1_764_000_005),
            ..Default::default()
        }
    }

    #[test]
    fn writes_an_investigation_awaiting_a_reply() {
        let inv = awaiting_investigation();
        let out = render(|o| write_investigation(o, &inv, false));
        assert_eq!(
            out,
            "investigation: INV-1002\n\
             mutation:      1002 · changer u003 · target u005 · Payroll Write · salary_change · changed 2025-05-03T09:00:00Z\n\
             status:        awaiting_user_response\n\
             awaiting:\n\
             \x20 INV-1002-changer  changer u003: Your change to Payroll\n\
             \x20   answer: frontdesk investigate respond INV-1002 INV-1002-changer --as changer --responder u003 --text TEXT\n\
             rights check:  not authorised: u003 holds Read on Payroll, the change needs Write.\n\
             report:        -\n"
        );
        let full = render(|o| write_investigation(o, &inv, true));
        assert!(full.contains("description:   Raised the salary of u005\n"), "{full}");
        assert!(full.contains("  evidence: {\"grants\":[]}\n"), "{full}");
        assert!(full.contains("status history:\n  2025-11-24T16:00:00Z  - -> pending  (investigation)\n"), "{full}");
        assert!(
            full.contains("  2025-11-24T16:00:05Z  clarification_requested -> awaiting_user_response  (request_for_information)\n"),
            "{full}"
        );
        assert!(full.ends_with("created:       2025-11-24T16:00:00Z\nupdated:       2025-11-24T16:00:05Z\n"), "{full}");
    }

    #[test]
    fn writes_a_finished_investigation() {
        let inv = v1::Investigation {
            status: v1::InvestigationStatus::AdvisoryReportGenerated as i32,
            awaiting: vec![],
            finished: true,
            claim: Some(v1::ClaimValidation {
                reply: "I stood in for u006".into(),
                valid: true,
                covered_user_id: "u006".into(),
                absence: "vacation".into(),
                explanation: "u006 was on vacation that day.".into(),
            }),
            manager: Some(v1::ManagerVerdict {
                manager_id: "u001".into(),
                decision: v1::ManagerDecision::Approve as i32,
                comment: "Fine".into(),
            }),
            report: Some(v1::AdvisoryReport {
                report_id: "RPT-1002".into(),
                summary: "The change was covered.\nAccept it.".into(),
                recommendation: v1::Recommendation::Accept as i32,
                details: "evidence".into(),
            }),
            ..awaiting_investigation()
        };
        let out = render(|o| write_investigation(o, &inv, false));
        assert!(out.contains("status:        advisory_report_generated (finished)\n"), "{out}");
        assert!(!out.contains("awaiting"), "{out}");
        assert!(
            out.contains("claim:         valid · stood in for u006 · vacation\n  u006 was on vacation that day.\n"),
            "{out}"
        );
        assert!(out.contains("manager:       u001 approve: Fine\n"), "{out}");
        assert!(
            out.ends_with("report:        RPT-1002 · recommendation accept\n  The change was covered.\n  Accept it.\n"),
            "{out}"
        );
        let full = render(|o| write_investigation(o, &inv, true));
        assert!(full.contains("report details:\n  evidence\n"), "{full}");
        assert!(full.contains("  changer's reply:\n    I stood in for u006\n"), "{full}");

        let manager = v1::PendingAction {
            action_id: "INV-1002-manager".into(),
            recipient_id: "u001".into(),
            recipient_role: v1::ResponderRole::Manager as i32,
            ..Default::default()
        };
        assert_eq!(
            respond_hint("INV-1002", &manager),
            "frontdesk investigate respond INV-1002 INV-1002-manager --as manager --responder u001 --approve|--deny [--text COMMENT]"
        );
    }

    #[test]
    fn writes_investigation_rows() {
        let inv = awaiting_investigation();
        assert_eq!(
            investigation_row(&inv),
            "INV-1002        1002      awaiting_user_response          2025-11-24T16:00:05Z  -                    INV-1002-changer (u003)"
        );
        assert_eq!(INVESTIGATION_HEADER.find("MUTATION"), investigation_row(&inv).find(" 1002 ").map(|i| i + 1));
        assert_eq!(INVESTIGATION_HEADER.find("AWAITING"), investigation_row(&inv).find("INV-1002-changer"));
    }

    fn audit_entries() -> Vec<v1::AuditEntry> {
        use v1::audit_entry::Entry;
        vec![
            v1::AuditEntry {
                investigation_id: "INV-1002".into(),
                seq: 1,
                correlation_id: "corr-INV-1002-1".into(),
                time: Some(prost_types::Timestamp { seconds: 1_764_000_000, nanos: 250_000_000 }),
                actor: "InvestigationAgent".into(),
                entry: Some(Entry::Message(v1::AgentMessage {
                    sender: v1::Agent::Investigation as i32,
                    receiver: v1::Agent::RightsCheck as i32,
                    action: v1::AgentAction::CheckRights as i32,
                    status: v1::AgentMessageStatus::Pending as i32,
                    ..Default::default()
                })),
            },
            v1::AuditEntry {
                investigation_id: "INV-1002".into(),
                seq: 12,
                correlation_id: "corr-INV-1002-2".into(),
                time: ts(1_764_000_009),
                actor: "changer:u003".into(),
                entry: Some(Entry::Reply(v1::HumanReply {
                    action_id: "INV-1002-changer".into(),
                    role: v1::ResponderRole::Changer as i32,
                    responder_id: "u003".into(),
                    text: "I stood in for \"Frank\", u006".into(),
                    decision: 0,
                })),
            },
        ]
    }

    #[test]
    fn writes_audit_rows_and_csv() {
        let entries = audit_entries();
        assert_eq!(
            audit_row(&entries[0]),
            "  1  2025-11-24T16:00:00Z  corr-INV-1002-1     InvestigationAgent          message        \
             investigation -> rights_check: check_rights (pending)"
        );
        assert_eq!(audit_header().find("KIND"), audit_row(&entries[1]).find("reply"));
        assert_eq!(audit_header().find("ACTOR"), audit_row(&entries[1]).find("changer:u003"));
        let csv = render(|o| write_audit_csv(o, &entries));
        assert_eq!(
            csv,
            "seq,time,correlation_id,actor,kind,summary\n\
             1,2025-11-24T16:00:00.250Z,corr-INV-1002-1,InvestigationAgent,message,\
             investigation -> rights_check: check_rights (pending)\n\
             12,2025-11-24T16:00:09Z,corr-INV-1002-2,changer:u003,reply,\
             \"INV-1002-changer from u003 (changer): I stood in for \"\"Frank\"\", u006\"\n"
        );
        assert_eq!(render(|o| write_audit_csv(o, &[])), "seq,time,correlation_id,actor,kind,summary\n");
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("line\nbreak"), "\"line\nbreak\"");
    }

    #[test]
    fn writes_pending_actions() {
        let mut action = awaiting_investigation().awaiting.remove(0);
        let out = render(|o| write_pending_action(o, &action));
        assert_eq!(
            out,
            "INV-1002-changer    INV-1002        u003       changer  awaiting  2025-11-24T16:00:05Z  Your change to Payroll\n"
        );
        assert_eq!(PENDING_HEADER.find("SUBJECT"), out.find("Your change"));
        assert_eq!(PENDING_HEADER.find("CREATED"), out.find("2025-"));
        action.status = v1::PendingActionStatus::Answered as i32;
        action.answered_at = ts(1_764_000_009);
        action.reply_json = "{\n  \"text\": \"I stood in for u006\"\n}".into();
        let out = render(|o| write_pending_action(o, &action));
        assert!(out.contains("  answered  "), "{out}");
        assert!(out.ends_with("\n    answered 2025-11-24T16:00:09Z: {\"text\":\"I stood in for u006\"}\n"), "{out}");
    }

    #[test]
    fn parses_llm_calls() {
        match command(&["llm-calls", "conv-1", "--run", "3f0b4d7e1f20", "--prompts", "--page-size", "2"]).unwrap() {
            Command::LlmCalls { thread, run, prompts, page_size } => {
                assert_eq!(
                    (thread.as_str(), run.as_deref(), prompts, page_size),
                    ("conv-1", Some("3f0b4d7e1f20"), true, 2)
                );
            }
            other => panic!("{other:?}"),
        }
        match command(&["llm-calls", "CUST-001:TKT-1"]).unwrap() {
            Command::LlmCalls { thread, run: None, prompts: false, page_size: 500 } => {
                assert_eq!(thread, "CUST-001:TKT-1")
            }
            other => panic!("{other:?}"),
        }
        assert!(command(&["llm-calls"]).is_err(), "a thread is required");
    }

    fn llm_call() -> v1::LlmCall {
        v1::LlmCall {
            run_id: "0197a5e4-7c1d-7aa0-9c55-3f0b4d7e1f20".into(),
            node: "supervisor".into(),
            purpose: "supervisor.route".into(),
            model: "gpt-4o-mini".into(),
            prompt_tokens: 230,
            completion_tokens: 12,
            cost_usd: 0.0001,
            latency: Some(prost_types::Duration { seconds: 0, nanos: 410_000_000 }),
            attempts: 1,
            error: String::new(),
            prompt_json:
                r#"[{"role":"system","content":"Route the message."},{"role":"user","content":"line one\nline two"}]"#
                    .into(),
            response_json: r#"{"content":"billing","tool_calls":[{"name":"lookup","arguments":"{\"id\": 1}"}]}"#.into(),
            time: ts(1_764_000_000),
        }
    }

    #[test]
    fn writes_llm_call_rows() {
        let call = llm_call();
        let row = llm_call_row(&call);
        let header = llm_call_header();
        assert!(row.starts_with("2025-11-24T16:00:00Z  3f0b4d7e1f20  supervisor  "), "{row}");
        assert!(row.ends_with("  ok"), "{row}");
        for (column, value) in [
            ("NODE", "supervisor "),
            ("PURPOSE", "supervisor.route"),
            ("MODEL", "gpt-4o-mini"),
            ("TOKENS", "230+12"),
            ("STATUS", "ok"),
        ] {
            assert_eq!(header.find(column), row.find(value), "{column} lines up:\n{header}\n{row}");
        }
        // LATENCY is right-aligned: the value ends where the header does.
        assert_eq!(header.find("LATENCY").map(|i| i + "LATENCY".len()), row.find("410ms").map(|i| i + "410ms".len()));

        let retried = v1::LlmCall { attempts: 3, ..call.clone() };
        assert!(llm_call_row(&retried).ends_with("  ok (3 attempts)"));
        let failed = v1::LlmCall { attempts: 2, error: "model unavailable".into(), ..call.clone() };
        assert!(llm_call_row(&failed).ends_with("  failed after 2 attempts: model unavailable"));
        let bare = v1::LlmCall { latency: None, time: None, node: String::new(), run_id: String::new(), ..call };
        assert!(
            llm_call_row(&bare).starts_with(&format!("{:<22}{:<14}{:<20}supervisor.route", "-", "-", "-")),
            "{}",
            llm_call_row(&bare)
        );
    }

    #[test]
    fn writes_llm_call_prompts_in_full_or_redacted() {
        let full = llm_call();
        assert_eq!(
            render(|o| write_llm_call_prompts(o, &full)),
            "    system: Route the message.\n    user: line one\n      line two\n    reply: billing\n    tool call: lookup({\"id\":1})\n"
        );

        let redacted = v1::LlmCall {
            prompt_json: r#"[{"role":"system","chars":18},{"role":"user","chars":22}]"#.into(),
            response_json: r#"{"chars":7,"tool_calls":[{"name":"lookup","chars":8}]}"#.into(),
            ..llm_call()
        };
        assert_eq!(
            render(|o| write_llm_call_prompts(o, &redacted)),
            "    prompt (redacted): system 18 chars, user 22 chars\n    reply (redacted): 7 chars, tool call lookup (8 chars)\n"
        );

        let failed = v1::LlmCall { response_json: "null".into(), error: "timeout".into(), ..redacted };
        assert!(render(|o| write_llm_call_prompts(o, &failed)).ends_with("    reply: none (the call failed)\n"));
    }

    fn command(args: &[&str]) -> Result<Command, clap::Error> {
        Ok(cli(args)?.command)
    }

    #[test]
    fn parses_ask() {
        let args = [
            "ask",
            "Who invented",
            "CRISPR?",
            "--retry-limit",
            "3",
            "--corpus",
            "handbook",
            "--key",
            "k1",
            "--quiet-events",
        ];
        match command(&args).unwrap() {
            Command::Ask { question, retry_limit, corpus, key, quiet_events } => {
                assert_eq!(question.join(" "), "Who invented CRISPR?");
                assert!(quiet_events);
                assert_eq!(
                    ask_options(retry_limit, corpus, key),
                    AskOptions {
                        retry_limit: Some(3),
                        corpus: Some("handbook".into()),
                        idempotency_key: Some("k1".into())
                    }
                );
            }
            other => panic!("{other:?}"),
        }
        match command(&["ask", "What is CRISPR?", "--idempotency-key", "k2"]).unwrap() {
            Command::Ask { question, retry_limit, corpus, key, quiet_events } => {
                assert_eq!((question, quiet_events), (vec!["What is CRISPR?".to_string()], false));
                let opts = ask_options(retry_limit, corpus, key);
                assert_eq!(opts, AskOptions { idempotency_key: Some("k2".into()), ..AskOptions::default() });
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(command(&["ask"]).unwrap_err().kind(), clap::error::ErrorKind::MissingRequiredArgument);
        assert_eq!(
            command(&["ask", "q", "--retry-limit", "many"]).unwrap_err().kind(),
            clap::error::ErrorKind::ValueValidation
        );
        assert_eq!(
            command(&["ask", "q", "--retry-limit", "-1"]).unwrap_err().kind(),
            clap::error::ErrorKind::UnknownArgument
        );
    }

    #[test]
    fn parses_research_show_and_list() {
        assert!(matches!(
            command(&["research", "show", "RES-1"]).unwrap(),
            Command::Research(ResearchCommand::Show { research_id }) if research_id == "RES-1"
        ));
        match command(&["research", "list", "--page-size", "5", "--page-token", "t", "--all"]).unwrap() {
            Command::Research(ResearchCommand::List { page_size, page_token, all }) => {
                assert_eq!((page_size, page_token.as_deref(), all), (5, Some("t"), true));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            command(&["research", "list"]).unwrap(),
            Command::Research(ResearchCommand::List { page_size: 0, page_token: None, all: false })
        ));
        assert_eq!(command(&["research", "show"]).unwrap_err().kind(), clap::error::ErrorKind::MissingRequiredArgument);
    }

    fn answered_research() -> v1::Research {
        let result = |step_id: u32, step: &str, answer: &str| v1::ResearchResult {
            step_id,
            step: step.into(),
            answer: answer.into(),
            citations: vec![v1::Citation {
                document_id: "crispr".into(),
                document_title: "CRISPR gene editing".into(),
                passage: 2,
                text: "Jennifer Doudna and Emmanuelle Charpentier ...".into(),
            }],
            attempt: 1,
        };
        v1::Research {
            research_id: "RES-0190a1b2c3d4e5f60718293a4b5c6d7e".into(),
            question: "Who invented CRISPR gene editing, and when was the transistor invented?".into(),
            corpus: "sample".into(),
            outcome: v1::ResearchOutcome::Answered as i32,
            current_step: v1::ResearchStep::Finalizer as i32,
            retry_count: 1,
            retry_limit: 5,
            plan: Some(v1::Plan {
                research_steps: vec![
                    "Find who invented CRISPR gene editing".into(),
                    "Find when the transistor was invented".into(),
                ],
                expert_steps: vec!["Combine the findings".into()],
                attempt: 2,
            }),
            results: vec![
                result(0, "Find who invented CRISPR gene editing", "Doudna and Charpentier."),
                result(1, "Find when the transistor was invented", "In 1947."),
            ],
            expert: Some(v1::ExpertAnswer {
                answer: "Doudna and Charpentier; 1947.".into(),
                reasoning: "From the findings.".into(),
                attempt: 1,
            }),
            final_answer: "Doudna and Charpentier invented CRISPR; the transistor dates from 1947.".into(),
            final_reasoning_trace: "Planned two steps.\nResearched both.".into(),
            messages: vec![v1::OrchestratorMessage {
                sender: "orchestrator".into(),
                receiver: "planner".into(),
                r#type: "instruction".into(),
                content: "Develop a logical plan to answer: Who invented CRISPR?".into(),
                step_id: None,
            }],
            created_at: ts(1_764_000_000),
            updated_at: ts(1_764_000_009),
            ..Default::default()
        }
    }

    #[test]
    fn writes_plans_results_and_expert_answers() {
        let r = answered_research();
        assert_eq!(
            render(|o| write_plan(o, r.plan.as_ref().unwrap())),
            "plan (attempt 2):\n\
             \x20 research 0: Find who invented CRISPR gene editing\n\
             \x20 research 1: Find when the transistor was invented\n\
             \x20 expert 0: Combine the findings\n"
        );
        let no_research = v1::Plan { research_steps: vec![], expert_steps: vec!["Compute 2+2".into()], attempt: 1 };
        assert_eq!(
            render(|o| write_plan(o, &no_research)),
            "plan (attempt 1):\n  research: none\n  expert 0: Compute 2+2\n"
        );
        assert_eq!(
            render(|o| write_research_result(o, &r.results[0])),
            "result [step 0] Find who invented CRISPR gene editing (attempt 1):\n\
             \x20 Doudna and Charpentier.\n\
             \x20 [crispr#2] CRISPR gene editing\n"
        );
        let uncited =
            v1::ResearchResult { citations: vec![], answer: "Nothing\n\nfound.".into(), ..r.results[1].clone() };
        assert_eq!(
            render(|o| write_research_result(o, &uncited)),
            "result [step 1] Find when the transistor was invented (attempt 1):\n  Nothing\n  found.\n  (no citations)\n"
        );
        assert_eq!(
            render(|o| write_expert_answer(o, r.expert.as_ref().unwrap())),
            "expert answer (attempt 1):\n  Doudna and Charpentier; 1947.\n  reasoning:\n    From the findings.\n"
        );
    }

    #[test]
    fn writes_a_research() {
        let r = answered_research();
        assert_eq!(
            render(|o| write_research(o, &r, false)),
            "research: RES-0190a1b2c3d4e5f60718293a4b5c6d7e\n\
             question: Who invented CRISPR gene editing, and when was the transistor invented?\n\
             outcome:  answered (retries 1 of 5)\n\
             final answer:\n\
             \x20 Doudna and Charpentier invented CRISPR; the transistor dates from 1947.\n\
             reasoning trace:\n\
             \x20 Planned two steps.\n\
             \x20 Researched both.\n"
        );
        let full = render(|o| write_research(o, &r, true));
        assert!(
            full.contains("corpus:   sample\nstep:     finalizer\noutcome:  answered (retries 1 of 5)\n"),
            "{full}"
        );
        assert!(full.contains("plan (attempt 2):\n"), "{full}");
        assert!(full.contains("result [step 1] Find when the transistor was invented (attempt 1):\n"), "{full}");
        assert!(full.contains("expert answer (attempt 1):\n"), "{full}");
        assert!(
            full.contains(
                "messages (1):\n  orchestrator -> planner (instruction): Develop a logical plan to answer: Who invented CRISPR?\n"
            ),
            "{full}"
        );
        assert!(full.ends_with("created:  2025-11-24T16:00:00Z\nupdated:  2025-11-24T16:00:09Z\n"), "{full}");

        let failed = v1::Research {
            outcome: v1::ResearchOutcome::Failed as i32,
            error: "model unavailable".into(),
            error_component: "researcher".into(),
            final_answer: "The question could not be answered.".into(),
            final_reasoning_trace: String::new(),
            ..answered_research()
        };
        let out = render(|o| write_research(o, &failed, false));
        assert!(
            out.contains("outcome:  failed in researcher (retries 1 of 5)\nerror:    model unavailable\n"),
            "{out}"
        );
        assert!(out.ends_with("reasoning trace: -\n"), "{out}");
    }

    #[test]
    fn writes_research_rows() {
        let r = answered_research();
        let row = research_row(&r);
        assert_eq!(
            row,
            "RES-0190a1b2c3d4e5f60718293a4b5c6d7e  answered         1/5  2025-11-24T16:00:09Z  \
             Who invented CRISPR gene editing, and when was the transistor invented?"
        );
        assert_eq!(RESEARCH_HEADER.find("OUTCOME"), row.find("answered"));
        assert_eq!(RESEARCH_HEADER.find("UPDATED"), row.find("2025-"));
        assert_eq!(RESEARCH_HEADER.find("QUESTION"), row.find("Who invented"));
        assert_eq!(RESEARCH_HEADER.find("RETRIES").map(|i| i + "RETRIES".len()), row.find("1/5").map(|i| i + 3));
        let long = v1::Research { question: "why ".repeat(30), ..answered_research() };
        assert!(research_row(&long).ends_with("why why…"), "{}", research_row(&long));
    }

    #[test]
    fn timeout_bounds_every_call_and_no_retries_is_a_global_flag() {
        let plain = cli(&["workflows"]).unwrap();
        assert_eq!(timeouts(&plain), Timeouts::default());
        assert!(!plain.no_retries);
        let set = cli(&["chat", "--timeout", "2.5", "--no-retries"]).unwrap();
        let t = Some(std::time::Duration::from_millis(2_500));
        assert_eq!(timeouts(&set), Timeouts { unary: t, streaming: t });
        assert!(set.no_retries);
        for bad in ["0", "-1", "soon", "NaN", "1e300"] {
            let err = cli(&["workflows", &format!("--timeout={bad}")]).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation, "{bad}");
        }
    }

    fn parse_chat(args: &[&str]) -> (String, Option<String>, bool) {
        match cli(args).unwrap().command {
            Command::Chat { workflow, conversation, turn } => (workflow, conversation, turn.quiet_events),
            other => panic!("not a chat command: {other:?}"),
        }
    }

    #[test]
    fn parses_chat_with_a_workflow() {
        assert_eq!(parse_chat(&["chat"]), ("intake".to_string(), None, false));
        assert_eq!(
            parse_chat(&["chat", "--workflow", "service_call", "--quiet-events"]),
            ("service_call".to_string(), None, true)
        );
        assert_eq!(
            parse_chat(&["chat", "--workflow", "service_call", "--conversation", "call-7"]),
            ("service_call".to_string(), Some("call-7".to_string()), false)
        );
    }

    fn call_state(node: &str, ended: bool) -> v1::ServiceCallState {
        v1::ServiceCallState {
            current_node: node.into(),
            context_json: r#"{"customer_id":"CUS-00001","flags":{"plan_flag":1}}"#.into(),
            node_traversal_path: vec!["GREET_CUSTOMER".into(), "Plan".into()],
            missing_mandatory_fields: vec!["customer_phone_number".into()],
            call_ended: ended,
            model_calls: 3,
            prompt_tokens: 250,
            completion_tokens: 30,
        }
    }

    fn call_conversation(state: v1::ServiceCallState) -> v1::Conversation {
        v1::Conversation {
            conversation_id: "conv-1".into(),
            workflow: "service_call".into(),
            state: Some(v1::conversation::State::ServiceCall(state)),
            ..Default::default()
        }
    }

    fn event(id: u64, node: &str, kind: v1::run_event::Kind) -> v1::RunEvent {
        v1::RunEvent { run_id: "run-1".into(), event_id: id, node: node.into(), kind: Some(kind), ..Default::default() }
    }

    #[test]
    fn writes_a_service_call_turn() {
        use v1::run_event::Kind;
        let started = |id, node: &str| event(id, node, Kind::NodeStarted(v1::NodeStarted { step: 0 }));
        let events = vec![
            started(1, "receive"),
            started(2, "Check_IF_existing_customer"),
            event(
                3,
                "Check_IF_existing_customer",
                Kind::ToolCalled(v1::ToolCalled {
                    call_id: "call_1".into(),
                    name: "customer_get".into(),
                    arguments_json: r#"{"phone": "555-1234"}"#.into(),
                }),
            ),
            event(
                4,
                "Check_IF_existing_customer",
                Kind::ToolReturned(v1::ToolReturned {
                    call_id: "call_1".into(),
                    name: "customer_get".into(),
                    result_json: r#""no customer found""#.into(),
                    is_error: true,
                    latency: Some(prost_types::Duration { seconds: 0, nanos: 3_000_000 }),
                }),
            ),
            started(5, "navigator"),
            started(6, "Plan"),
            event(
                7,
                "Plan",
                Kind::ToolCalled(v1::ToolCalled {
                    call_id: "call_2".into(),
                    name: "task_create".into(),
                    arguments_json: r#"{"customer_id":"CUS-00001"}"#.into(),
                }),
            ),
            event(
                8,
                "Plan",
                Kind::ToolReturned(v1::ToolReturned {
                    call_id: "call_2".into(),
                    name: "task_create".into(),
                    result_json: r#"{"task_id": "TSK-00001"}"#.into(),
                    is_error: false,
                    latency: Some(prost_types::Duration { seconds: 1, nanos: 250_000_000 }),
                }),
            ),
            started(9, "navigator"),
        ];
        let out = render(|o| {
            write_service_call_turn(o, &events, &call_state("Communicate_To_Customer_Before_Action", false))
        });
        assert_eq!(
            out,
            "  nodes: Check_IF_existing_customer → Plan\n\
             \x20 tool [Check_IF_existing_customer] customer_get({\"phone\":\"555-1234\"}) ✗ \"no customer found\" 3ms\n\
             \x20 tool [Plan] task_create({\"customer_id\":\"CUS-00001\"}) ✓ {\"task_id\":\"TSK-00001\"} 1.25s\n\
             \x20 current node: Communicate_To_Customer_Before_Action\n"
        );
        let ended = render(|o| {
            write_service_call_turn(o, &[started(1, "Execute_Call_Hangup")], &call_state("Execute_Call_Hangup", true))
        });
        assert_eq!(ended, "  nodes: Execute_Call_Hangup\n  current node: Execute_Call_Hangup (the call has ended)\n");
        assert_eq!(
            render(|o| write_service_call_turn(o, &[], &call_state("", false))),
            "  nodes: -\n  current node: -\n"
        );
    }

    #[test]
    fn summarises_a_service_call() {
        let c = call_conversation(call_state("Plan", false));
        assert_eq!(state_summary(&c), "node: Plan · missing: customer_phone_number · 3 model calls, 250+30 tok");
        assert_eq!(conversation_mode(&c), "Plan");
        let ended = call_conversation(v1::ServiceCallState {
            missing_mandatory_fields: vec![],
            ..call_state("Execute_Call_Hangup", true)
        });
        assert_eq!(
            service_call_summary(service_call_state(&ended).unwrap(), false),
            "3 model calls, 250+30 tok · call ended"
        );
        assert_eq!(conversation_mode(&ended), "ended");

        let shown = render_service_call_state(&call_state("Plan", false));
        assert_eq!(
            shown,
            "current node: Plan\n\
             call ended:   no\n\
             path:         GREET_CUSTOMER → Plan\n\
             missing:      customer_phone_number\n\
             model calls:  3 (250 prompt + 30 completion tokens)\n\
             context:\n\
             \x20 {\n\
             \x20   \"customer_id\": \"CUS-00001\",\n\
             \x20   \"flags\": {\n\
             \x20     \"plan_flag\": 1\n\
             \x20   }\n\
             \x20 }\n"
        );
        let fresh = v1::ServiceCallState { current_node: "GREET_CUSTOMER".into(), ..Default::default() };
        assert!(render_service_call_state(&fresh).contains("path:         -\nmissing:      -\n"));
    }

    #[test]
    fn knows_when_a_call_has_ended() {
        let result = |state| v1::TurnResult { conversation: Some(call_conversation(state)), ..Default::default() };
        assert!(call_ended(&result(call_state("Execute_Call_Hangup", true))));
        assert!(!call_ended(&result(call_state("Plan", false))));
        assert!(!call_ended(&v1::TurnResult::default()));

        let refusal = |reason: &str| {
            let details =
                tonic_types::ErrorDetails::with_error_info(reason, "frontdesk.dev", std::collections::HashMap::new());
            let status = <tonic::Status as tonic_types::StatusExt>::with_error_details(
                tonic::Code::FailedPrecondition,
                "conversation conv-1 has ended",
                details,
            );
            CliError::Client(ClientError::from(status))
        };
        assert!(is_conversation_ended(&refusal("CONVERSATION_ENDED")));
        assert!(!is_conversation_ended(&refusal("INTERRUPT_PENDING")));
        assert!(!is_conversation_ended(&CliError::Io(std::io::Error::other("closed"))));
    }
}
