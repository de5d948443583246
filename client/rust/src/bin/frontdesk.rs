//! `frontdesk`: command-line client for the Frontdesk service.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use frontdesk_client::{
    code_name, describe_event, format_duration, v1, Client, ClientError, SendOptions, StartOptions, TriageEvent,
    TriageOptions, TurnEvent,
};
use futures::StreamExt;
use tokio::io::AsyncBufReadExt;

#[derive(Debug, Parser)]
#[command(name = "frontdesk", version, about = "Command-line client for the Frontdesk service")]
struct Cli {
    /// Server address.
    #[arg(long, global = true, env = "FRONTDESK_SERVER", default_value = "http://127.0.0.1:50051")]
    server: String,

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
    Chat {
        /// Workflow of a new conversation.
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
    let client = Client::connect(cli.server.clone()).await.map_err(|e| CliError::Connect(cli.server.clone(), e))?;
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
        Command::Triage { customer, subject, language, idempotency_key, quiet_events, message } => {
            let opts = TriageOptions { subject, language, idempotency_key };
            Printer::new(quiet_events).triage(&client, &customer, &message.join(" "), opts).await?;
        }
        Command::Tickets { customer, active, status, page_size, page_token, all } => {
            let status = if active { Some(StatusArg::Active) } else { status };
            list_tickets(&client, &customer, status, page_size, page_token, all).await?
        }
        Command::Ticket(TicketCommand::Show { customer, ticket }) => show_ticket(&client, &customer, &ticket).await?,
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

fn conversation_mode(c: &v1::Conversation) -> String {
    match &c.state {
        Some(v1::conversation::State::Intake(s)) => mode_name(s.mode),
        None => "-".to_string(),
    }
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

    fn result(&mut self, r: &v1::TurnResult) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        self.end_delta_line(&mut out)?;
        let reply = r.reply.as_ref().map(|m| m.text.as_str()).unwrap_or_default();
        writeln!(out, "assistant: {reply}")?;
        if let Some(c) = &r.conversation {
            let replayed = if r.replayed { " · replayed" } else { "" };
            writeln!(out, "{}", self.dim(&format!("  [{}{replayed}]", state_summary(c))))?;
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
        let mut stream = client.triage_ticket(customer, message, opts).await?;
        let mut result = None;
        while let Some(item) = stream.next().await {
            let item = match item {
                Ok(item) => item,
                Err(e) => {
                    self.end_delta_line(&mut std::io::stdout().lock())?;
                    return Err(e.into());
                }
            };
            match item {
                TriageEvent::Resolution(r) => self.resolution(&r)?,
                TriageEvent::Event(e) => self.event(&e)?,
                TriageEvent::Result(r) => {
                    self.triage_result(&r)?;
                    result = Some(r);
                }
            }
        }
        self.end_delta_line(&mut std::io::stdout().lock())?;
        result.ok_or(CliError::Client(ClientError::StreamEndedWithoutResult))
    }

    /// Runs one turn, printing as it streams.
    async fn turn(
        &mut self,
        client: &Client,
        id: &str,
        text: &str,
        opts: SendOptions,
    ) -> Result<v1::TurnResult, CliError> {
        let mut stream = client.send_message(id, text, opts).await?;
        let mut result = None;
        while let Some(item) = stream.next().await {
            let item = match item {
                Ok(item) => item,
                Err(e) => {
                    self.end_delta_line(&mut std::io::stdout().lock())?;
                    return Err(e.into());
                }
            };
            match item {
                TurnEvent::Event(e) => self.event(&e)?,
                TurnEvent::Result(r) => {
                    self.result(&r)?;
                    result = Some(r);
                }
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
            let mut token = page_token;
            let mut header = false;
            loop {
                let resp = client.list_conversations(workflow.as_deref(), page_size, token.take()).await?;
                if !header {
                    if resp.conversations.is_empty() {
                        println!("no conversations");
                    } else {
                        println!("{:<36}  {:<12}  {:>5}  {:<14}  UPDATED", "ID", "WORKFLOW", "TURNS", "MODE");
                    }
                    header = true;
                }
                for c in &resp.conversations {
                    println!(
                        "{:<36}  {:<12}  {:>5}  {:<14}  {}",
                        c.conversation_id,
                        c.workflow,
                        c.turn_count,
                        conversation_mode(c),
                        timestamp(c.update_time.as_ref())
                    );
                }
                if resp.next_page_token.is_empty() {
                    break;
                }
                if !all {
                    println!("more: --page-token {}", resp.next_page_token);
                    break;
                }
                token = Some(resp.next_page_token);
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

const TICKET_HEADER: &str =
    "ID            STATUS     TYPE       URGENCY   ACTION            UPDATED               SUBJECT";

fn print_ticket_row(t: &v1::Ticket) {
    println!(
        "{:<12}  {:<9}  {:<9}  {:<8}  {:<16}  {:<20}  {}",
        t.ticket_id,
        status_name(t.status),
        ticket_type_name(t.ticket_type),
        urgency_name(t.urgency),
        action_name(t.recommended_action),
        timestamp(t.update_time.as_ref()),
        if t.subject.is_empty() { "-" } else { &t.subject }
    );
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
            print_ticket_row(t);
        }
        shown += active.len();
    }
    if status != Some(StatusArg::Active) {
        let archived = match status {
            Some(StatusArg::Resolved) => Some(v1::TicketStatus::Resolved),
            Some(StatusArg::Escalated) => Some(v1::TicketStatus::Escalated),
            _ => None,
        };
        let mut token = page_token;
        loop {
            let resp = client.list_tickets(customer, archived, page_size, token.take()).await?;
            if shown == 0 && !resp.tickets.is_empty() {
                println!("{TICKET_HEADER}");
            }
            for t in &resp.tickets {
                print_ticket_row(t);
            }
            shown += resp.tickets.len();
            if resp.next_page_token.is_empty() {
                break;
            }
            if !all {
                println!("more: --page-token {}", resp.next_page_token);
                break;
            }
            token = Some(resp.next_page_token);
        }
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
                printer.turn(client, &id, text, opts).await.map(|_| ())
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
    Ok(c.conversation_id)
}
