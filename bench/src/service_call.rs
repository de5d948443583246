//! `frontdesk-bench service-call` (issue 19): scripted phone calls through the REAL service-call
//! workflow — the shipped 17-node flow (`AgentConfig::shipped()`), `service_call::build` (real
//! reply, MCP and navigator agents, real prompts, the real tool loop) and `ConversationHost` on
//! an in-memory checkpointer, wired as the server wires it — and the tokens each call costs,
//! counted with a real tokenizer (cl100k_base, `service_call::tokens`), next to the design's
//! published 21,000-30,000 tokens per call.
//!
//! Two test doubles stand in for the outside world, both clearly labelled:
//!
//! - the model is a SCRIPTED test double ([`ScriptedCallModel`]), not an LLM. It answers by the
//!   request's purpose and the node its prompt names (each node's prompt starts with the node's
//!   role and goal from the flow): the reply agent with one or two sentences for that node; the
//!   navigator with the node's default next node (the "Default next node" line of its prompt),
//!   except after the greeting, where the customer stated their need at once and the call goes
//!   straight to `Extract_Customer_Issue` (as in tests/service_call.rs's `whole_call`), always
//!   checked against the `next_node` enum of the request's response schema; the extraction agent
//!   with the call's expected fields; the tool agent with each tool node's calls, one per round,
//!   then its JSON answer (the round is the number of tool results in the request). What a call
//!   says comes from its script ([`CUSTOMERS`], 20 customers with their own issue and wording):
//!   the driver tells the model which call is on the line, and the model checks that the facts
//!   it answers with are in the prompt it was given (the issue, the phone number).
//! - the MCP tools are an in-bench test double of the PMO MCP server ([`PmoDouble`]): its seven
//!   tools with their names, descriptions and argument schemas (hand-copied from
//!   server/pmo-mcp), its seeded service catalog and its result shapes (`{"customer": {...}}`,
//!   `{"task": {...}}`, `{"booking": {...}}`, the hangup record; `customer_get` of an unknown
//!   phone is a tool error), over a small in-memory store. Not the `frontdesk-pmo-mcp` binary.
//!
//! ```text
//! cargo run --release -p frontdesk-bench -- service-call [--calls 20] [--dump-first]
//! ```
//!
//! Each call is ten customer messages, greeting to hangup. Before printing any figure the bench
//! checks every call (and exits non-zero otherwise): the nodes of each turn, the 16 nodes of the
//! happy path in `node_traversal_path`, `call_ended`, the reply of every turn but the last, 31
//! model requests by purpose (9 reply, 11 navigator, 2 extraction, 9 tool-agent rounds) each in
//! one attempt, each tool round offered only its node's tools, `model_calls` 31 in the call's
//! state (every model call, each tool round too),
//! the six tool calls in order with only `customer_get` an error, the context fields they fill,
//! and that a message after the hangup is refused.
//!
//! Token figures per call, three ways:
//! - **ServiceCallState**: the counters the workflow keeps in the call's state and reports on the
//!   wire (`prompt_tokens`, `completion_tokens`): per model call, the messages the agent built
//!   (a tool round's with the tool results before it) and its answer;
//! - **requests, messages**: every request the model received, its messages counted with
//!   `service_call::tokens::prompt` (this adds the schema instruction `LlmClient` appends to a
//!   structured call's system message), and every reply;
//! - **requests, all**: the same plus what else each request carries: the response JSON schema
//!   (its serialized JSON) and the tool definitions (OpenAI's cookbook count for gpt-4, see
//!   [`cookbook_tool_tokens`]; their serialized JSON is shown too). Both are estimates of what a
//!   provider bills: it renders them its own way.
//!
//! `--dump-first` prints every request of the first call (messages, schema, tools offered, the
//! answer) to stderr.

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, PoisonError,
    },
    time::Instant,
};

use async_trait::async_trait;
use frontdesk_llm::{ChatModel, ChatRequest, ChatResponse, LlmClient, LlmError, Role, TokenUsage, ToolCall, ToolSpec};
use frontdesk_runtime::{EventKind, MemoryCheckpointer, Runner, RunnerConfig};
use frontdesk_workflows::{
    conversation::{ConversationHost, ConversationLimits},
    service_call::{
        self,
        config::{AgentConfig, NodeAction},
        tokens, CallDeps, CallSpec, CallView, ToolFailure, ToolProvider, ToolReply,
    },
    ConversationWorkflow, Tenant, TurnOptions,
};
use serde_json::{json, Value};

use crate::{current_thread, err, stats};

/// The design's published tokens per call, after its own optimisations.
const DESIGN_LOW: f64 = 21_000.0;
const DESIGN_HIGH: f64 = 30_000.0;

const REPLY: &str = "worker_reply_agent.reply";
const NAVIGATE: &str = "node_navigator_agent.decide";
const EXTRACT: &str = "worker_mcp_agent.extract";
const TOOLS: &str = "worker_mcp_agent.tools";
/// The agents, in the order the breakdown shows them.
const AGENTS: [(&str, &str); 4] =
    [(REPLY, "reply"), (NAVIGATE, "navigator"), (EXTRACT, "extraction"), (TOOLS, "tools")];

/// Model requests of one call by purpose (the happy path below).
/// Tool rounds: a round per call, and an answer round only where the tools' mapped results do
/// not fill the node's fields (use_mcp_to_get_info picks a category, Plan names the task, the
/// hangup gives its status).
const EXPECTED_REQUESTS: [(&str, u64); 4] = [(REPLY, 9), (NAVIGATE, 11), (EXTRACT, 2), (TOOLS, 9)];
/// `model_calls` in the call's state: every model call, each round of a tool loop too.
const EXPECTED_MODEL_CALLS: u32 = 31;

/// The nodes each of the ten customer messages runs (tests/service_call.rs's `whole_call`).
const TURN_NODES: [&[&str]; 10] = [
    &["GREET_CUSTOMER"],
    &["Extract_Customer_Issue", "Identify_Issue"],
    &["Empathize"],
    &["Console_Build_Rapport"],
    &["use_mcp_to_get_info", "Try_To_Gather_Customers_Data"],
    &["Extract_Customer_Contact_Info", "Check_IF_existing_customer", "Plan", "Communicate_To_Customer_Before_Action"],
    &["Execute_Plan_Using_MCP", "Tell_Customers_Execution"],
    &["Ask_If_Anything_Else"],
    &["Goodbye_And_Hangup"],
    &["Execute_Call_Hangup"],
];

/// The tool calls of one call, in order, and whether each is a tool error.
const EXPECTED_TOOLS: [(&str, bool); 6] = [
    ("setting_list", false),
    ("customer_get", true),
    ("customer_create", false),
    ("task_create", false),
    ("person_calendar_book", false),
    ("call_hangup", false),
];

// ---------------------------------------------------------------------------------------------
// the scripts

/// One customer's call.
#[derive(Debug, Clone, Copy)]
struct Customer {
    name: &'static str,
    email: Option<&'static str>,
    /// The first message: the need, stated at once.
    opening: &'static str,
    /// The second message: more about the issue.
    detail: &'static str,
    /// `customers_main_ask` as the extraction agent states it.
    issue: &'static str,
    entity: &'static str,
    /// The service catalog entry (code, name) of the seeded PMO catalog.
    category: (&'static str, &'static str),
    task_name: &'static str,
    technician: &'static str,
}

#[allow(clippy::too_many_arguments)] // a table row
const fn customer(
    name: &'static str,
    email: Option<&'static str>,
    opening: &'static str,
    detail: &'static str,
    issue: &'static str,
    entity: &'static str,
    category: (&'static str, &'static str),
    task_name: &'static str,
    technician: &'static str,
) -> Customer {
    Customer { name, email, opening, detail, issue, entity, category, task_name, technician }
}

const PLUMBING: (&str, &str) = ("plumbing", "Plumbing");
const ELECTRICAL: (&str, &str) = ("electrical", "Electrical");
const HVAC: (&str, &str) = ("hvac", "HVAC");
const LANDSCAPING: (&str, &str) = ("landscaping", "Landscaping");
const GENERAL: (&str, &str) = ("general_maintenance", "General Maintenance");

/// Twenty customers, each with their own issue and wording; `--calls` above 20 repeats them with
/// new phone numbers.
#[rustfmt::skip]
const CUSTOMERS: [Customer; 20] = [
    customer("Ann Lee", Some("ann.lee@example.com"), "Hello, my kitchen sink is leaking and I need a plumber",
        "Water drips from the pipe under the sink all the time", "Leaking kitchen sink", "kitchen sink", PLUMBING,
        "Fix leaking kitchen sink", "Alex Rivera"),
    customer("Ben Ortiz", None, "Hi, half the outlets in my living room stopped working",
        "The breaker looks fine but nothing has power", "Dead living room outlets", "living room outlets", ELECTRICAL,
        "Repair dead outlets", "Sam Chen"),
    customer("Carla Novak", None, "Good morning, my furnace won't turn on and the house is cold",
        "It clicks a few times and then nothing happens", "Furnace not starting", "furnace", HVAC, "Repair furnace",
        "Jordan Lee"),
    customer("David Park", Some("d.park@example.com"), "Hello, I need help with drywall repair",
        "There is a hole in my living room wall", "Drywall repair in the living room", "living room wall", GENERAL,
        "Patch living room drywall", "Morgan Diaz"),
    customer("Elena Rossi", None, "Hi, I'd like someone to fix the sprinklers in my front yard",
        "Two of the sprinkler heads are broken and the lawn is drying out", "Broken front yard sprinklers",
        "sprinkler heads", LANDSCAPING, "Repair front yard sprinklers", "Taylor Brooks"),
    customer("Farid Haddad", None, "Hello, my water heater is making a banging noise",
        "It started last week and the water is only lukewarm now", "Noisy water heater", "water heater", PLUMBING,
        "Service water heater", "Casey Kim"),
    customer("Grace Kim", Some("grace.kim@example.com"), "Hi, the lights in my kitchen keep flickering",
        "It happens every evening when the dishwasher runs", "Flickering kitchen lights", "kitchen lights",
        ELECTRICAL, "Check kitchen lighting circuit", "Sam Chen"),
    customer("Hugo Martin", None, "Hello, my air conditioner blows warm air",
        "It is an outdoor unit about ten years old", "Air conditioner blowing warm air", "air conditioner", HVAC,
        "Repair air conditioner", "Jordan Lee"),
    customer("Ines Silva", None, "Hi, my back door won't close properly anymore",
        "The frame seems to have swollen after the rain", "Back door not closing", "back door", GENERAL,
        "Adjust back door", "Morgan Diaz"),
    customer("Jack Brown", Some("jack.brown@example.com"), "Hello, the drain in my shower is completely blocked",
        "Water stays in the tray for an hour after a shower", "Blocked shower drain", "shower drain", PLUMBING,
        "Unblock shower drain", "Alex Rivera"),
    customer("Kira Patel", None, "Hi, a large branch fell from the oak tree in my garden",
        "It is hanging over the fence and might fall on the shed", "Fallen oak branch in the garden", "oak tree",
        LANDSCAPING, "Remove fallen oak branch", "Taylor Brooks"),
    customer("Luis Garcia", None, "Hello, a breaker in my panel keeps tripping",
        "It trips whenever I turn on the space heater in the bedroom", "Tripping breaker", "electrical panel",
        ELECTRICAL, "Inspect tripping breaker", "Sam Chen"),
    customer("Maya Cohen", Some("maya.cohen@example.com"), "Hi, my heat pump is making a loud rattling noise",
        "The noise comes from the outdoor unit when it starts", "Rattling heat pump", "heat pump", HVAC,
        "Service heat pump", "Jordan Lee"),
    customer("Noah Wilson", None, "Hello, I need two bedroom walls painted", "The paint is peeling near the windows",
        "Repainting two bedroom walls", "bedroom walls", GENERAL, "Repaint bedroom walls", "Morgan Diaz"),
    customer("Olivia Chen", None, "Hi, my toilet keeps running after every flush",
        "I can hear water filling the tank all night", "Running toilet", "toilet", PLUMBING, "Repair running toilet",
        "Casey Kim"),
    customer("Pavel Ivanov", Some("pavel.ivanov@example.com"), "Hello, I need my overgrown hedge trimmed",
        "It is about three metres tall along the driveway", "Overgrown hedge along the driveway", "hedge",
        LANDSCAPING, "Trim driveway hedge", "Taylor Brooks"),
    customer("Quinn Murphy", None, "Hi, I'd like a new ceiling light installed in my hallway",
        "There is already wiring in the ceiling from an old fixture", "Hallway ceiling light installation",
        "hallway ceiling", ELECTRICAL, "Install hallway ceiling light", "Sam Chen"),
    customer("Rosa Alvarez", None, "Hello, there is no heat coming from the radiators upstairs",
        "The downstairs radiators are warm but the upstairs ones stay cold", "Cold upstairs radiators", "radiators",
        HVAC, "Balance upstairs radiators", "Jordan Lee"),
    customer("Sofia Berg", Some("sofia.berg@example.com"), "Hi, a window in my bedroom is stuck and won't open",
        "The latch turns but the sash does not move at all", "Stuck bedroom window", "bedroom window", GENERAL,
        "Free stuck bedroom window", "Morgan Diaz"),
    customer("Tom Becker", None, "Hello, there is a puddle under my washing machine",
        "The hose connection at the back seems to be dripping", "Leaking washing machine hose",
        "washing machine hose", PLUMBING, "Replace washing machine hose", "Alex Rivera"),
];

const WHEN: [&str; 5] = [
    "It started yesterday",
    "It has been like this since Monday",
    "It began this morning",
    "About a week ago",
    "Since the weekend",
];
const THANKS: [&str; 4] = ["Thanks", "Thank you", "Okay, thanks", "Good to hear"];
const OK: [&str; 4] = ["ok", "Sure", "Alright", "Go ahead"];
const YES: [&str; 4] = ["Yes please", "Yes, that works", "Sounds good", "Perfect, please do"];
const GREAT: [&str; 4] = ["Great", "Wonderful, thanks", "Thank you very much", "Great, thanks"];
const DONE: [&str; 4] = ["No, that's all", "Nothing else, thanks", "That's everything", "No, thank you"];
const BYE: [&str; 4] = ["Bye", "Goodbye", "Bye now", "Thanks, bye"];
const SLOTS: [&str; 4] = ["08:00-10:00", "10:00-12:00", "13:00-15:00", "15:00-17:00"];

/// One scripted call: the customer, their phone number, the ids the PMO double gives them, and
/// the visit the model books.
#[derive(Debug, Clone)]
struct Script {
    index: usize,
    customer: Customer,
    phone: String,
    customer_id: String,
    task_id: String,
    session: String,
    date: String,
    slot: &'static str,
}

impl Script {
    fn new(index: usize) -> Self {
        let n = index + 1;
        Self {
            index,
            customer: CUSTOMERS[index % CUSTOMERS.len()],
            phone: format!("555-{:04}", 100 + n),
            customer_id: format!("CUS-{n:05}"),
            task_id: format!("TSK-{n:05}"),
            session: format!("call-{n:05}"),
            date: format!("2026-12-{:02}", 1 + index % 28),
            slot: SLOTS[index % SLOTS.len()],
        }
    }

    /// The ten customer messages, greeting to hangup.
    fn messages(&self) -> [String; 10] {
        let (c, i) = (&self.customer, self.index);
        let contact = match c.email {
            Some(email) => format!("I'm {}, my number is {} and my email is {email}", c.name, self.phone),
            None => format!("This is {}, {}", c.name, self.phone),
        };
        [
            c.opening.to_owned(),
            c.detail.to_owned(),
            WHEN[i % WHEN.len()].to_owned(),
            THANKS[i % THANKS.len()].to_owned(),
            OK[(i + 1) % OK.len()].to_owned(),
            contact,
            YES[(i + 2) % YES.len()].to_owned(),
            GREAT[(i + 3) % GREAT.len()].to_owned(),
            DONE[i % DONE.len()].to_owned(),
            BYE[(i + 1) % BYE.len()].to_owned(),
        ]
    }

    fn first_name(&self) -> &str {
        self.customer.name.split(' ').next().unwrap_or(self.customer.name)
    }
}

// ---------------------------------------------------------------------------------------------
// the scripted model

fn bench_error(problem: String) -> LlmError {
    LlmError::Config { field: "bench.service_call", problem }
}

/// What the model received and answered, per request.
#[derive(Debug, Clone)]
struct Seen {
    purpose: String,
    node: String,
    /// `tokens::prompt` of the request's messages.
    prompt: u64,
    /// The response schema the request carries, as serialized JSON.
    schema: u64,
    /// The tool definitions the request carries: OpenAI's cookbook count for gpt-4
    /// ([`cookbook_tool_tokens`]), and as serialized JSON.
    tools: u64,
    tools_json: u64,
    /// The cookbook count of only the tools the node calls; equal to `tools` when the flow offers
    /// each node only its own (checked).
    tools_needed: u64,
    completion: u64,
    request: ChatRequest,
    answer: String,
}

/// An answer: the node the request is for, the content, and the tool call it makes (name,
/// arguments), if any.
type Answer = (String, String, Option<(String, Value)>);

/// SCRIPTED test double (not an LLM): answers every request of the service-call flow by rules
/// (module docs) for the call the driver has put on the line; records every request.
struct ScriptedCallModel {
    /// Prompt openings that name a node: the reply agent's and the MCP agent's.
    reply_nodes: Vec<(String, String)>,
    mcp_nodes: Vec<(String, String)>,
    current: Mutex<Option<Script>>,
    seen: Mutex<Vec<Seen>>,
    next_call_id: AtomicU64,
}

impl ScriptedCallModel {
    fn new(config: &AgentConfig) -> Result<Self, String> {
        let mut reply_nodes = Vec::new();
        let mut mcp_nodes = Vec::new();
        for node in &config.nodes {
            match node.node_action {
                // Every worker's prompt opens with its node's role and goal (`nodes::opening`).
                NodeAction::Reply => reply_nodes
                    .push((format!("You are {}. Goal: {}\n", node.role, node.node_goal), node.node_name.clone())),
                NodeAction::Mcp => mcp_nodes
                    .push((format!("You are {}. Goal: {}\n", node.role, node.node_goal), node.node_name.clone())),
                NodeAction::Internal => {}
            }
        }
        for list in [&reply_nodes, &mcp_nodes] {
            for (i, (a, name)) in list.iter().enumerate() {
                if let Some((_, other)) = list[i + 1..].iter().find(|(b, _)| a == b) {
                    return Err(format!(
                        "nodes {name} and {other} have the same role and goal: prompts cannot tell them apart"
                    ));
                }
            }
        }
        Ok(Self {
            reply_nodes,
            mcp_nodes,
            current: Mutex::new(None),
            seen: Mutex::new(Vec::new()),
            next_call_id: AtomicU64::new(1),
        })
    }

    fn begin(&self, script: &Script) {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(script.clone());
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Takes the requests recorded so far (one call's, when taken after each call).
    fn take_seen(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.seen.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn script(&self) -> Result<Script, LlmError> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| bench_error("no call on the line".into()))
    }

    /// The node a reply or MCP request is for, from its system prompt's opening.
    fn node_of(list: &[(String, String)], request: &ChatRequest) -> Result<String, LlmError> {
        let system = request.messages.first().filter(|m| m.role == Role::System).map_or("", |m| m.content.as_str());
        list.iter()
            .find(|(opening, _)| system.starts_with(opening.as_str()))
            .map(|(_, node)| node.clone())
            .ok_or_else(|| bench_error(format!("{}: no node of the flow opens this prompt", request.purpose)))
    }

    /// The answer to one request: text, or one tool call.
    fn answer(&self, request: &ChatRequest) -> Result<Answer, LlmError> {
        let s = self.script()?;
        let c = &s.customer;
        let text = request.messages.iter().map(|m| m.content.as_str()).collect::<Vec<_>>().join("\n");
        let require = |fact: &str, what: &str| {
            if text.contains(fact) {
                Ok(())
            } else {
                Err(bench_error(format!("{}: the prompt does not show the {what} {fact:?}", request.purpose)))
            }
        };
        match request.purpose.as_str() {
            REPLY => {
                let node = Self::node_of(&self.reply_nodes, request)?;
                let issue = c.issue.to_lowercase();
                let reply = match node.as_str() {
                    "GREET_CUSTOMER" => {
                        format!(
                            "Hello, thank you for calling! I'm sorry to hear about the {issue}; let's get that sorted."
                        )
                    }
                    "ASK_CUSTOMER_ABOUT_THEIR_NEED" => "How can we help you today?".to_owned(),
                    "Identify_Issue" => {
                        format!("I see, so it is a case of {issue}. Let me make sure we send the right person.")
                    }
                    "Empathize" => "I am sorry to hear that; that must be frustrating.".to_owned(),
                    "Console_Build_Rapport" => {
                        "Don't worry, you are in good hands and we fix this kind of thing every day.".to_owned()
                    }
                    "Try_To_Gather_Customers_Data" => {
                        "May I have your name and a phone number to reach you?".to_owned()
                    }
                    "Communicate_To_Customer_Before_Action" => {
                        format!("I will book one of our technicians for the {issue}. Does that work for you?")
                    }
                    "Tell_Customers_Execution" => {
                        format!("{} will come on {} between {}.", c.technician, s.date, s.slot.replace('-', " and "))
                    }
                    "Ask_If_Anything_Else" => "Is there anything else I can help you with?".to_owned(),
                    "Goodbye_And_Hangup" => format!("Thank you for calling, {}. Have a great day!", s.first_name()),
                    other => return Err(bench_error(format!("no scripted reply for node {other}"))),
                };
                Ok((node, reply, None))
            }
            NAVIGATE => {
                let user =
                    request.messages.iter().rev().find(|m| m.role == Role::User).map_or("", |m| m.content.as_str());
                let line = |prefix: &str| user.lines().find_map(|l| l.strip_prefix(prefix)).map(str::to_owned);
                let node =
                    line("Current node: ").ok_or_else(|| bench_error("navigator prompt without its node".into()))?;
                let default = line("Default next node: ")
                    .ok_or_else(|| bench_error("navigator prompt without a default".into()))?;
                let (next, reason) = if node == "GREET_CUSTOMER" {
                    ("Extract_Customer_Issue".to_owned(), "The customer stated their need at once.")
                } else {
                    (default, "No branching condition holds: the default next node.")
                };
                let allowed: Vec<&str> = request
                    .response_format
                    .as_ref()
                    .and_then(|f| f.schema.pointer("/properties/next_node/enum"))
                    .and_then(Value::as_array)
                    .map(|names| names.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                if !allowed.contains(&next.as_str()) {
                    return Err(bench_error(format!("navigator at {node}: {next} is not among {allowed:?}")));
                }
                Ok((node, json!({"reason": reason, "next_node": next}).to_string(), None))
            }
            EXTRACT => {
                let node = Self::node_of(&self.mcp_nodes, request)?;
                let updates = match node.as_str() {
                    "Extract_Customer_Issue" => {
                        require(c.opening, "customer's need")?;
                        json!({"customers_main_ask": c.issue, "related_entities_for_customers_ask": [c.entity]})
                    }
                    "Extract_Customer_Contact_Info" => {
                        require(&s.phone, "phone number")?;
                        json!({"customer_name": c.name, "customer_phone_number": s.phone, "customer_email": c.email})
                    }
                    other => return Err(bench_error(format!("no scripted extraction for node {other}"))),
                };
                Ok((node, json!({"context_updates": updates}).to_string(), None))
            }
            TOOLS => {
                let node = Self::node_of(&self.mcp_nodes, request)?;
                let round = request.messages.iter().filter(|m| m.role == Role::Tool).count();
                // Each tool node's calls, one per round, then its answer.
                let (calls, answer): (Vec<(&str, Value)>, Value) = match node.as_str() {
                    "use_mcp_to_get_info" => {
                        require(c.issue, "issue")?;
                        (
                            vec![("setting_list", json!({"category": "dl__service_category"}))],
                            json!({"matching_service_catalog_to_solve_customers_issue": c.category.1}),
                        )
                    }
                    "Check_IF_existing_customer" => {
                        require(&s.phone, "phone number")?;
                        (
                            vec![
                                ("customer_get", json!({"phone": s.phone})),
                                ("customer_create", json!({"name": c.name, "phone": s.phone, "email": c.email})),
                            ],
                            json!({"customer_id": s.customer_id}),
                        )
                    }
                    "Plan" => (
                        vec![(
                            "task_create",
                            json!({"customer_id": s.customer_id, "service_category": c.category.0, "description": c.detail}),
                        )],
                        json!({"task_id": s.task_id, "task_name": c.task_name}),
                    ),
                    "Execute_Plan_Using_MCP" => (
                        vec![(
                            "person_calendar_book",
                            json!({"task_id": s.task_id, "date": s.date, "time_slot": s.slot, "technician": c.technician}),
                        )],
                        // The booking as the tool returned it (the last tool result in the
                        // prompt), once there is one.
                        json!({"appointment_details": request
                            .messages
                            .iter()
                            .rev()
                            .find(|m| m.role == Role::Tool)
                            .and_then(|m| serde_json::from_str::<Value>(&m.content).ok())
                            .and_then(|v| v.get("booking").cloned())}),
                    ),
                    "Execute_Call_Hangup" => (
                        vec![("call_hangup", json!({"call_session_id": s.session, "reason": "resolved"}))],
                        json!({"call_ended": true, "hangup_status": "success"}),
                    ),
                    other => return Err(bench_error(format!("no scripted tool calls for node {other}"))),
                };
                match calls.into_iter().nth(round) {
                    Some((name, arguments)) => Ok((node, String::new(), Some((name.to_owned(), arguments)))),
                    None => Ok((node, json!({"context_updates": answer}).to_string(), None)),
                }
            }
            other => Err(bench_error(format!("no scripted answer for purpose {other}"))),
        }
    }
}

/// Tokens of a tool definition as OpenAI's cookbook counts them for gpt-4 (cl100k_base; "How to
/// count tokens with tiktoken", `num_tokens_for_tools`): 10 per function, its `name:description`,
/// 3 for its properties, then per property 3 and its `name:type:description` (an enum: -3, then 3
/// and the item per item), 12 at the end. An estimate: the provider renders definitions its own
/// way, more compactly than their JSON.
fn cookbook_tool_tokens(spec: &ToolSpec) -> u64 {
    let trim = |text: &str| text.strip_suffix('.').unwrap_or(text).to_owned();
    let mut n: i64 = 10;
    n += tokens::count(&format!("{}:{}", spec.name, trim(&spec.description))) as i64;
    if let Some(properties) = spec.parameters.get("properties").and_then(Value::as_object).filter(|p| !p.is_empty()) {
        n += 3;
        for (key, property) in properties {
            n += 3;
            let kind = match property.get("type") {
                Some(Value::String(kind)) => kind.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            if let Some(items) = property.get("enum").and_then(Value::as_array) {
                n -= 3;
                for item in items {
                    n += 3 + item.as_str().map_or(0, |item| tokens::count(item) as i64);
                }
            }
            let description = trim(property.get("description").and_then(Value::as_str).unwrap_or(""));
            n += tokens::count(&format!("{key}:{kind}:{description}")) as i64;
        }
    }
    (n + 12).max(0) as u64
}

/// The tools a tool node of the shipped flow calls (its prompt template names them).
fn node_tools(node: &str) -> &'static [&'static str] {
    match node {
        "use_mcp_to_get_info" => &["setting_list"],
        "Check_IF_existing_customer" => &["customer_get", "customer_create"],
        "Plan" => &["task_create"],
        "Execute_Plan_Using_MCP" => &["person_calendar_book"],
        "Execute_Call_Hangup" => &["call_hangup"],
        _ => &[],
    }
}

/// A tool definition as a request carries it, for counting as JSON.
fn tool_json(spec: &ToolSpec) -> String {
    json!({"type": "function", "function": {"name": spec.name, "description": spec.description, "parameters": spec.parameters}})
        .to_string()
}

#[async_trait]
impl ChatModel for ScriptedCallModel {
    fn model_name(&self) -> &str {
        "scripted-service-call"
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let (node, content, call) = self.answer(request)?;
        let mut tool_calls = Vec::new();
        let mut answer = content.clone();
        if let Some((name, arguments)) = call {
            let id = format!("call_{}", self.next_call_id.fetch_add(1, Ordering::Relaxed));
            if !request.tools.iter().any(|t| t.name == name) {
                return Err(bench_error(format!("{name} is not among the tools offered")));
            }
            answer = format!("{name}{arguments}");
            tool_calls.push(ToolCall { id, name, arguments: arguments.to_string() });
        }
        let prompt = tokens::prompt(&request.messages);
        let schema = request.response_format.as_ref().map_or(0, |f| tokens::count(&f.schema.to_string()));
        let tools = request.tools.iter().map(cookbook_tool_tokens).sum::<u64>();
        let tools_json = request.tools.iter().map(|t| tokens::count(&tool_json(t))).sum::<u64>();
        let needed = node_tools(&node);
        let tools_needed =
            request.tools.iter().filter(|t| needed.contains(&t.name.as_str())).map(cookbook_tool_tokens).sum::<u64>();
        let completion = match tool_calls.first() {
            Some(call) => tokens::count(&call.name) + tokens::count(&call.arguments),
            None => tokens::count(&content),
        };
        self.seen.lock().unwrap_or_else(PoisonError::into_inner).push(Seen {
            purpose: request.purpose.clone(),
            node,
            prompt,
            schema,
            tools,
            tools_json,
            tools_needed,
            completion,
            request: request.clone(),
            answer,
        });
        Ok(ChatResponse {
            content,
            tool_calls,
            usage: TokenUsage { prompt_tokens: prompt, completion_tokens: completion },
            model: self.model_name().to_owned(),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// the PMO MCP server's test double

fn spec(name: &str, description: &str, parameters: Value) -> ToolSpec {
    ToolSpec { name: name.into(), description: description.into(), parameters }
}

/// The PMO MCP server's seven tools: names, descriptions and argument schemas as
/// server/pmo-mcp declares them (hand-copied).
fn pmo_specs() -> Vec<ToolSpec> {
    let opt = |description: &str| json!({"description": description, "type": ["string", "null"], "default": null});
    let text = |description: &str| json!({"description": description, "type": "string"});
    vec![
        spec(
            "setting_list",
            "List the entries of a settings category. `dl__service_category` is the service catalog (the \
             service_category codes task_create takes); `dl__time_slot` lists the booking time slots.",
            json!({"type": "object", "title": "SettingListArgs", "required": ["category"], "properties": {
                "category": text("The settings category: `dl__service_category` (the service catalog), `dl__time_slot` (booking time slots) or `dl__task_priority`."),
            }}),
        ),
        spec(
            "entity_list",
            "List projects or tasks, optionally filtered by a text they contain.",
            json!({"type": "object", "title": "EntityListArgs", "required": ["entity_type"], "properties": {
                "entity_type": text("`project` or `task`."),
                "filter": opt("Only entities whose id, name, description, status, category, priority or address contains this text (ignoring case)."),
            }}),
        ),
        spec(
            "customer_create",
            "Create a customer and return it with its id. One customer per phone number: look the caller up with \
             customer_get first.",
            json!({"type": "object", "title": "CustomerCreateArgs", "required": ["name", "phone"], "properties": {
                "name": text("The customer's full name."),
                "phone": text("The customer's phone number (unique: one customer per number)."),
                "email": {"type": ["string", "null"], "default": null},
                "address": opt("The service address."),
            }}),
        ),
        spec(
            "customer_get",
            "Find a customer by phone number or customer_id.",
            json!({"type": "object", "title": "CustomerGetArgs", "properties": {
                "phone": opt("The caller's phone number, written any way."),
                "customer_id": opt("A customer id such as `CUS-00001`; takes precedence over the phone."),
            }}),
        ),
        spec(
            "task_create",
            "Create a service task (a work order) for a customer and return it with its id.",
            json!({"type": "object", "title": "TaskCreateArgs", "required": ["customer_id", "service_category", "description"], "properties": {
                "customer_id": text("The customer the work is for (`CUS-...`)."),
                "service_category": text("A `dl__service_category` code or name, e.g. `plumbing` or `HVAC`."),
                "description": text("What is wrong and what the customer asks for."),
                "priority": {"description": "How urgent the work is; `medium` when not given.", "type": ["string", "null"],
                    "enum": ["low", "medium", "high", "urgent", null], "default": null},
                "address": opt("Where the work is; the customer's address when not given."),
            }}),
        ),
        spec(
            "person_calendar_book",
            "Book a technician's visit for a task on a date and time slot; return the booking with its id. A \
             technician already booked at that time is an error that lists the free slots.",
            json!({"type": "object", "title": "PersonCalendarBookArgs", "required": ["task_id", "date", "time_slot"], "properties": {
                "task_id": text("The task to book a visit for (`TSK-...`)."),
                "date": text("The visit's date, `YYYY-MM-DD`, today or later."),
                "time_slot": text("A `dl__time_slot` code such as `08:00-10:00`."),
                "technician": opt("A technician's name; when not given, the first free technician of the task's service category is booked."),
            }}),
        ),
        spec(
            "call_hangup",
            "End the phone call. Hanging up a call that has already ended changes nothing.",
            json!({"type": "object", "title": "CallHangupArgs", "required": ["call_session_id"], "properties": {
                "call_session_id": text("The phone call's session id."),
                "reason": opt("Why the call ends, e.g. `resolved` or `caller_request`."),
            }}),
        ),
    ]
}

/// The seeded service catalog of the PMO server (server/pmo-mcp/migrations/0002_seed.sql).
fn service_catalog() -> Value {
    let entry =
        |code: &str, name: &str, description: &str| json!({"code": code, "name": name, "description": description});
    json!({"category": "dl__service_category", "entries": [
        entry("plumbing", "Plumbing", "Leaks, blocked drains, water heaters, fixtures and pipes"),
        entry("electrical", "Electrical", "Outlets, wiring, lighting, breakers and panels"),
        entry("hvac", "HVAC", "Heating, ventilation and air conditioning: repair and servicing"),
        entry("landscaping", "Landscaping", "Lawn care, planting, irrigation and tree work"),
        entry("general_maintenance", "General Maintenance", "Repairs, doors and windows, painting and odd jobs"),
    ]})
}

#[derive(Default)]
struct PmoStore {
    customers: Vec<Value>,
    tasks: Vec<Value>,
    bookings: usize,
    calls: Vec<(String, Value, bool)>,
}

/// TEST DOUBLE of the PMO MCP server (module docs): its tools, result shapes and errors over an
/// in-memory store that numbers customers, tasks and bookings from 1; records every call.
#[derive(Default)]
struct PmoDouble {
    store: Mutex<PmoStore>,
}

const CREATED_AT: &str = "2026-11-24T10:00:00Z";

impl PmoDouble {
    fn take_calls(&self) -> Vec<(String, Value, bool)> {
        std::mem::take(&mut self.store.lock().unwrap_or_else(PoisonError::into_inner).calls)
    }
}

#[async_trait]
impl ToolProvider for PmoDouble {
    fn specs(&self) -> Vec<ToolSpec> {
        pmo_specs()
    }

    /// As the PMO server annotates its tools: lookups and the hang-up repeat nothing.
    fn repeatable(&self, name: &str) -> bool {
        matches!(name, "setting_list" | "entity_list" | "customer_get" | "call_hangup")
    }

    async fn call(&self, name: &str, arguments: Value) -> Result<ToolReply, ToolFailure> {
        let started = Instant::now();
        let mut store = self.store.lock().unwrap_or_else(PoisonError::into_inner);
        let arg = |key: &str| arguments.get(key).and_then(Value::as_str).map(str::to_owned);
        let error = |text: String| (Value::String(text), true);
        let (content, is_error) = match name {
            "setting_list" => match arg("category").as_deref() {
                Some("dl__service_category") => (service_catalog(), false),
                other => error(format!("unknown settings category {other:?}; known categories: dl__service_category, dl__task_priority, dl__time_slot")),
            },
            "entity_list" => (json!({"entity_type": arg("entity_type"), "count": 0, "items": []}), false),
            "customer_get" => {
                let phone = arg("phone").unwrap_or_default();
                match store.customers.iter().find(|c| c["phone"] == phone.as_str()) {
                    Some(customer) => (json!({"customer": customer}), false),
                    None => error(format!("no customer found with phone {phone}; create one with customer_create")),
                }
            }
            "customer_create" => {
                let id = format!("CUS-{:05}", store.customers.len() + 1);
                let customer = json!({"id": id, "name": arg("name"), "phone": arg("phone"), "email": arg("email"),
                    "address": arg("address"), "created_at": CREATED_AT});
                store.customers.push(customer.clone());
                (json!({"customer": customer}), false)
            }
            "task_create" => {
                let customer_id = arg("customer_id").unwrap_or_default();
                if store.customers.iter().any(|c| c["id"] == customer_id.as_str()) {
                    let id = format!("TSK-{:05}", store.tasks.len() + 1);
                    let task = json!({"id": id, "customer_id": customer_id, "project_id": null,
                        "service_category": arg("service_category"), "description": arg("description"),
                        "priority": arg("priority").unwrap_or_else(|| "medium".into()), "address": arg("address"),
                        "status": "open", "created_at": CREATED_AT});
                    store.tasks.push(task.clone());
                    (json!({"task": task}), false)
                } else {
                    error(format!("invalid customer_id: no customer {customer_id}"))
                }
            }
            "person_calendar_book" => {
                let task_id = arg("task_id").unwrap_or_default();
                if store.tasks.iter().any(|t| t["id"] == task_id.as_str()) {
                    store.bookings += 1;
                    let booking = json!({"id": format!("BKG-{:05}", store.bookings), "task_id": task_id,
                        "date": arg("date"), "time_slot": arg("time_slot"), "technician": arg("technician"),
                        "created_at": CREATED_AT});
                    (json!({"booking": booking}), false)
                } else {
                    error(format!("no task {task_id}; create it with task_create first"))
                }
            }
            "call_hangup" => (
                json!({"ended": true, "call_session_id": arg("call_session_id"), "reason": arg("reason"),
                    "already_ended": false, "ended_at": CREATED_AT}),
                false,
            ),
            other => error(format!("no tool {other}")),
        };
        store.calls.push((name.to_owned(), arguments.clone(), is_error));
        Ok(ToolReply { content, is_error, latency: started.elapsed() })
    }
}

// ---------------------------------------------------------------------------------------------
// one call

#[derive(Debug, Clone, Default)]
struct Observed {
    view: Option<CallView>,
    seen: Vec<Seen>,
}

fn percentile(samples: &[f64], p: f64) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted.get(rank.min(sorted.len()) - 1).copied().unwrap_or(0.0)
}

/// Runs one call, greeting to hangup, and checks everything the script fixes (module docs).
async fn run_call(
    host: &dyn ConversationWorkflow<View = CallView>,
    model: &ScriptedCallModel,
    tools: &PmoDouble,
    script: &Script,
) -> Result<Observed, String> {
    let id = format!("call-{:05}", script.index + 1);
    let fail = |what: String| format!("call {} ({}): {what}", script.index + 1, script.customer.name);
    model.begin(script);
    host.start(&Tenant::default(), Some(id.clone()), None).await.map_err(|e| fail(e.to_string()))?;
    let mut view = None;
    let mut llm_events: BTreeMap<String, u64> = BTreeMap::new();
    let mut tool_events = Vec::new();
    for (turn, text) in script.messages().iter().enumerate() {
        let mut handle =
            host.send(&Tenant::default(), &id, text, TurnOptions::default()).await.map_err(|e| fail(e.to_string()))?;
        let mut nodes = Vec::new();
        while let Some(event) = handle.events.recv().await {
            match event.kind {
                EventKind::NodeStarted { .. } => {
                    let node = event.node.as_deref().unwrap_or_default().to_owned();
                    if node != service_call::nodes::RECEIVE && node != service_call::nodes::NAVIGATOR {
                        nodes.push(node);
                    }
                }
                EventKind::LlmCall(info) => {
                    if info.attempts != 1 {
                        return Err(fail(format!("{} took {} attempts", info.purpose, info.attempts)));
                    }
                    *llm_events.entry(info.purpose).or_default() += 1;
                }
                EventKind::ToolReturned { name, is_error, .. } => tool_events.push((name, is_error)),
                EventKind::NodeRetrying { message, .. } | EventKind::NodeFailed { message, .. } => {
                    return Err(fail(format!("turn {}: a node failed: {message}", turn + 1)));
                }
                EventKind::RunFailed { message, .. } => {
                    return Err(fail(format!("turn {}: run failed: {message}", turn + 1)));
                }
                _ => {}
            }
        }
        let outcome = handle.outcome.await.map_err(|e| fail(format!("turn {}: {e}", turn + 1)))?;
        if nodes != TURN_NODES[turn] {
            return Err(fail(format!("turn {} ran {nodes:?}, expected {:?}", turn + 1, TURN_NODES[turn])));
        }
        let last = turn + 1 == TURN_NODES.len();
        match (&outcome.reply, last) {
            (Some(reply), false) if !reply.text.is_empty() => {}
            (None, true) => {}
            (reply, _) => return Err(fail(format!("turn {}: reply {reply:?}", turn + 1))),
        }
        view = Some(outcome.conversation.state);
    }
    let view = view.ok_or_else(|| fail("no turn ran".into()))?;
    if !view.call_ended {
        return Err(fail(format!("the call did not end (at {})", view.current_node)));
    }
    let path: Vec<&str> = TURN_NODES.iter().flat_map(|t| t.iter().copied()).collect();
    if view.node_traversal_path != path {
        return Err(fail(format!("node_traversal_path {:?}, expected {path:?}", view.node_traversal_path)));
    }
    if view.model_calls != EXPECTED_MODEL_CALLS {
        return Err(fail(format!(
            "model_calls {} in the call's state, expected {EXPECTED_MODEL_CALLS}",
            view.model_calls
        )));
    }
    if view.prompt_tokens == 0 || view.completion_tokens == 0 {
        return Err(fail(format!("token counters {} / {}", view.prompt_tokens, view.completion_tokens)));
    }
    let expected: BTreeMap<String, u64> = EXPECTED_REQUESTS.iter().map(|(p, n)| ((*p).to_owned(), *n)).collect();
    if llm_events != expected {
        return Err(fail(format!("model call events {llm_events:?}, expected {expected:?}")));
    }
    let seen = model.take_seen();
    let mut by_purpose: BTreeMap<String, u64> = BTreeMap::new();
    for s in &seen {
        *by_purpose.entry(s.purpose.clone()).or_default() += 1;
    }
    if by_purpose != expected {
        return Err(fail(format!("the model received {by_purpose:?}, expected {expected:?}")));
    }
    if let Some(s) = seen.iter().find(|s| s.tools != s.tools_needed) {
        return Err(fail(format!("node {} was offered tools it does not call: {:?}", s.node, s.request.tools)));
    }
    let want: Vec<(String, bool)> = EXPECTED_TOOLS.iter().map(|(n, e)| ((*n).to_owned(), *e)).collect();
    if tool_events != want {
        return Err(fail(format!("tool events {tool_events:?}, expected {want:?}")));
    }
    let calls: Vec<(String, bool)> = tools.take_calls().into_iter().map(|(n, _, e)| (n, e)).collect();
    if calls != want {
        return Err(fail(format!("the PMO double answered {calls:?}, expected {want:?}")));
    }
    let ctx = &view.context;
    let c = &script.customer;
    let checks = [
        ("customers_main_ask", json!(c.issue)),
        ("customer_name", json!(c.name)),
        ("customer_phone_number", json!(script.phone)),
        ("customer_id", json!(script.customer_id)),
        ("task_id", json!(script.task_id)),
        ("task_name", json!(c.task_name)),
        ("matching_service_catalog_to_solve_customers_issue", json!(c.category.1)),
        ("call_ended", json!(true)),
        ("hangup_status", json!("success")),
    ];
    for (field, value) in checks {
        if ctx[field] != value {
            return Err(fail(format!("context {field} = {}, expected {value}", ctx[field])));
        }
    }
    if ctx["appointment_details"]["id"].as_str().is_none_or(|id| !id.starts_with("BKG-")) {
        return Err(fail(format!("appointment_details {}, expected the booking", ctx["appointment_details"])));
    }
    if host.send(&Tenant::default(), &id, "Hello?", TurnOptions::default()).await.is_ok() {
        return Err(fail("a message after the hangup was accepted".into()));
    }
    Ok(Observed { view: Some(view), seen })
}

// ---------------------------------------------------------------------------------------------
// the bench

#[derive(Debug, Clone)]
struct Args {
    calls: usize,
    dump_first: bool,
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut args = Args { calls: 20, dump_first: false };
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--calls" => {
                let v = it.next().ok_or("--calls needs a value")?;
                args.calls = v.parse().map_err(|e| format!("--calls: {e}"))?;
            }
            "--dump-first" => args.dump_first = true,
            other => return Err(format!("unknown option {other}")),
        }
    }
    if !(1..=9_000).contains(&args.calls) {
        return Err("--calls must be 1 to 9000".into());
    }
    Ok(args)
}

/// Per-call figures.
#[derive(Debug, Clone, Default)]
struct PerCall {
    state_calls: f64,
    state_prompt: f64,
    state_completion: f64,
    requests: f64,
    prompt: f64,
    schema: f64,
    tools: f64,
    tools_json: f64,
    tools_needed: f64,
    completion: f64,
    /// By purpose: (requests, prompt, schemas and tool definitions, completion).
    agents: BTreeMap<String, [f64; 4]>,
}

impl PerCall {
    fn of(o: &Observed) -> Self {
        let view = o.view.as_ref().expect("a checked call has its view");
        let mut per = PerCall {
            state_calls: view.model_calls as f64,
            state_prompt: view.prompt_tokens as f64,
            state_completion: view.completion_tokens as f64,
            requests: o.seen.len() as f64,
            ..Default::default()
        };
        for s in &o.seen {
            per.prompt += s.prompt as f64;
            per.schema += s.schema as f64;
            per.tools += s.tools as f64;
            per.tools_json += s.tools_json as f64;
            per.tools_needed += s.tools_needed as f64;
            per.completion += s.completion as f64;
            let a = per.agents.entry(s.purpose.clone()).or_default();
            a[0] += 1.0;
            a[1] += s.prompt as f64;
            a[2] += (s.schema + s.tools) as f64;
            a[3] += s.completion as f64;
        }
        per
    }
}

fn n0(v: f64) -> String {
    let s = format!("{:.0}", v.round());
    let (sign, digits) = s.strip_prefix('-').map_or(("", s.as_str()), |d| ("-", d));
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    format!("{sign}{out}")
}

fn dump(seen: &[Seen]) {
    eprintln!("\n==== every request of call 1 ({} requests) ====", seen.len());
    for (i, s) in seen.iter().enumerate() {
        eprintln!(
            "\n--- #{:02} {} @ {}: prompt {} (+ schema {}, tools {}; as JSON {}), completion {} ---",
            i + 1,
            s.purpose,
            s.node,
            s.prompt,
            s.schema,
            s.tools,
            s.tools_json,
            s.completion
        );
        for m in &s.request.messages {
            eprintln!("[{:?}] {}", m.role, m.content);
        }
        if let Some(f) = &s.request.response_format {
            eprintln!("[response_format {}] {}", f.name, f.schema);
        }
        if !s.request.tools.is_empty() {
            eprintln!("[tools] {}", s.request.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", "));
        }
        eprintln!("=> {}", s.answer);
    }
    eprintln!("\n==== end of call 1 ====\n");
}

pub fn run(rest: impl Iterator<Item = String>) -> Result<(), String> {
    let args = parse_args(rest)?;
    let started = Instant::now();
    let config = Arc::new(AgentConfig::shipped());
    let model = Arc::new(ScriptedCallModel::new(&config)?);
    let tools = Arc::new(PmoDouble::default());
    println!("frontdesk-bench service-call: scripted calls through the REAL service_call workflow");
    println!(
        "  flow: the shipped agent_config.json ({} nodes), service_call::build + ConversationHost, in-memory checkpointer",
        config.nodes.len()
    );
    println!("  model: SCRIPTED test double (answers by purpose and node, from each call's script); not an LLM");
    println!(
        "  tools: in-bench TEST DOUBLE of the PMO MCP server (its 7 tools' names, descriptions, argument schemas and \
         result shapes); not the frontdesk-pmo-mcp binary"
    );
    println!("  tokens: cl100k_base (frontdesk_workflows::service_call::tokens)");
    println!(
        "  machine: {} x {}, {:.1} GiB, {}; build: {}",
        stats::nproc(),
        stats::cpu_model(),
        stats::mem_total_gib(),
        stats::os_name(),
        if cfg!(debug_assertions) { "debug" } else { "release" }
    );

    let observed: Vec<Observed> = current_thread().block_on(async {
        let checkpointer = Arc::new(MemoryCheckpointer::new(1));
        let spec = CallSpec { config: config.clone() };
        let deps = CallDeps {
            llm: LlmClient::new(model.clone()),
            config: config.clone(),
            tools: Some(tools.clone() as Arc<dyn ToolProvider>),
        };
        let graph = service_call::build(deps, &spec).map_err(err)?;
        let runner = Runner::new(graph, checkpointer, RunnerConfig::default());
        let host = ConversationHost::new(Arc::new(spec), runner, ConversationLimits::default());
        let mut all = Vec::with_capacity(args.calls);
        for index in 0..args.calls {
            let script = Script::new(index);
            let observed = run_call(&host, &model, &tools, &script).await?;
            if index == 0 && args.dump_first {
                dump(&observed.seen);
            }
            all.push(observed);
        }
        Ok::<_, String>(all)
    })?;
    if !model.seen().is_empty() {
        return Err("the model received requests outside the calls".into());
    }

    let per: Vec<PerCall> = observed.iter().map(PerCall::of).collect();
    let n = per.len();
    let total_requests: u64 = EXPECTED_REQUESTS.iter().map(|(_, n)| n).sum();
    println!(
        "\nverified: all {n} calls ended (call_ended, call_hangup) after 10 customer messages, each turn running its \
         expected nodes; node_traversal_path = the 16 nodes of the happy path; {total_requests} model requests per call \
         (9 reply, 11 navigator, 2 extraction, 9 tool-agent rounds), one attempt each, each tool round offered only \
         its node's tools; model_calls = \
         {EXPECTED_MODEL_CALLS} in the call's state; tool calls setting_list, customer_get (error: new customer), \
         customer_create, task_create, person_calendar_book, call_hangup; context filled; a message after the hangup refused"
    );

    let col = |f: &dyn Fn(&PerCall) -> f64| -> Vec<f64> { per.iter().map(f).collect() };
    let all = |p: &PerCall| p.prompt + p.schema + p.tools + p.completion;
    let row = |label: &str, v: Vec<f64>| {
        println!(
            "| {label} | {} | {} | {} | {} |",
            n0(percentile(&v, 0.0)),
            n0(percentile(&v, 50.0)),
            n0(percentile(&v, 100.0)),
            n0(v.iter().sum::<f64>() / v.len().max(1) as f64)
        );
    };
    println!("\nTokens per call (cl100k_base), {n} calls:\n");
    println!("| per call | min | p50 | max | mean |");
    println!("|---|---:|---:|---:|---:|");
    row("model requests", col(&|p| p.requests));
    row("model_calls, ServiceCallState", col(&|p| p.state_calls));
    row("prompt tokens, ServiceCallState", col(&|p| p.state_prompt));
    row("completion tokens, ServiceCallState", col(&|p| p.state_completion));
    row("**total, ServiceCallState**", col(&|p| p.state_prompt + p.state_completion));
    row("prompt tokens, every request's messages", col(&|p| p.prompt));
    row("+ response schemas (serialized JSON)", col(&|p| p.schema));
    row("+ tool definitions (OpenAI cookbook count for gpt-4)", col(&|p| p.tools));
    row("completion tokens, every reply", col(&|p| p.completion));
    row("**total, every request with schemas and tool definitions**", col(&all));
    row("(tool definitions as serialized JSON instead)", col(&|p| p.tools_json));

    let p50 = |v: Vec<f64>| percentile(&v, 50.0);
    let state_total = p50(col(&|p| p.state_prompt + p.state_completion));
    let sent_total = p50(col(&|p| p.prompt + p.completion));
    let all_total = p50(col(&all));
    println!("\nAgainst the design's published 21,000-30,000 tokens per call (target: at most half):\n");
    println!("| Frontdesk, total tokens per call, p50 | tokens | / 21,000 | / 30,000 | at most half of 21,000 |");
    println!("|---|---:|---:|---:|---|");
    for (label, v) in [
        ("ServiceCallState counters", state_total),
        ("every request's messages + replies", sent_total),
        ("every request with schemas and tool definitions", all_total),
    ] {
        println!(
            "| {label} | {} | {:.2} | {:.2} | {} |",
            n0(v),
            v / DESIGN_LOW,
            v / DESIGN_HIGH,
            if v <= DESIGN_LOW / 2.0 { "yes" } else { "no" }
        );
    }

    println!("\nBy agent, mean per call (requests counted as the model received them):\n");
    println!("| agent (purpose) | requests | prompt tokens (messages) | + schemas, tools | completion tokens | share of total |");
    println!("|---|---:|---:|---:|---:|---:|");
    let mean_total = per.iter().map(all).sum::<f64>() / n as f64;
    for (purpose, label) in AGENTS {
        let mean = |i: usize| per.iter().map(|p| p.agents.get(purpose).map_or(0.0, |a| a[i])).sum::<f64>() / n as f64;
        let total = mean(1) + mean(2) + mean(3);
        println!(
            "| {label} (`{purpose}`) | {} | {} | {} | {} | {:.0} % |",
            n0(mean(0)),
            n0(mean(1)),
            n0(mean(2)),
            n0(mean(3)),
            100.0 * total / mean_total
        );
    }
    let mean = |f: &dyn Fn(&PerCall) -> f64| per.iter().map(f).sum::<f64>() / n as f64;
    println!(
        "| all | {} | {} | {} | {} | 100 % |",
        n0(mean(&|p| p.requests)),
        n0(mean(&|p| p.prompt)),
        n0(mean(&|p| p.schema + p.tools)),
        n0(mean(&|p| p.completion))
    );
    println!("\ntotal {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_differ_and_fit_the_catalog() {
        let issues: std::collections::BTreeSet<&str> = CUSTOMERS.iter().map(|c| c.issue).collect();
        let openings: std::collections::BTreeSet<&str> = CUSTOMERS.iter().map(|c| c.opening).collect();
        assert_eq!((issues.len(), openings.len()), (20, 20));
        let codes: Vec<String> = service_catalog()["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["code"].as_str().unwrap().to_owned())
            .collect();
        assert!(CUSTOMERS.iter().all(|c| codes.iter().any(|code| code == c.category.0)));
        assert_eq!(Script::new(0).phone, "555-0101");
        assert_eq!(Script::new(20).customer.name, CUSTOMERS[0].name);
        assert_ne!(Script::new(20).phone, Script::new(0).phone);
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(n0(1234567.4), "1,234,567");
        assert_eq!(n0(999.0), "999");
        assert_eq!(n0(0.0), "0");
    }

    /// A call whose tools answer differently (the customer exists already) fails the checks.
    #[test]
    fn a_call_that_strays_from_the_script_is_refused() {
        let config = Arc::new(AgentConfig::shipped());
        let model = Arc::new(ScriptedCallModel::new(&config).unwrap());
        let tools = Arc::new(PmoDouble::default());
        let script = Script::new(0);
        let error = current_thread().block_on(async {
            tools.call("customer_create", json!({"name": "Ann Lee", "phone": script.phone})).await.unwrap();
            tools.take_calls();
            let spec = CallSpec { config: config.clone() };
            let deps = CallDeps {
                llm: LlmClient::new(model.clone()),
                config: config.clone(),
                tools: Some(tools.clone() as Arc<dyn ToolProvider>),
            };
            let runner = Runner::new(
                service_call::build(deps, &spec).unwrap(),
                Arc::new(MemoryCheckpointer::new(1)),
                RunnerConfig::default(),
            );
            let host = ConversationHost::new(Arc::new(spec), runner, ConversationLimits::default());
            run_call(&host, &model, &tools, &script).await.unwrap_err()
        });
        // A found customer settles the lookup in one round: the first check to notice is the
        // count of model calls, before the tool events.
        assert!(error.starts_with("call 1 (Ann Lee): model_calls 30"), "{error}");
    }

    /// Two calls through the real workflow pass every check; the figures add up.
    #[test]
    fn two_calls_pass_the_checks() {
        run(["--calls".to_owned(), "2".to_owned()].into_iter()).unwrap();
    }
}
