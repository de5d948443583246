//! The research workflow's records: steps, the orchestrator's messages, plans, research
//! results with citations, critic verdicts, the expert's answer.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::tool_loop::ToolUse;

/// Where the orchestrator is: the step that runs (or has just run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    #[default]
    Input,
    Planner,
    CriticPlanner,
    Researcher,
    CriticResearcher,
    Expert,
    CriticExpert,
    Finalizer,
    Error,
}

impl Step {
    /// The component's name, as messages and errors name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Input => "input",
            Step::Planner => "planner",
            Step::CriticPlanner => "critic_planner",
            Step::Researcher => "researcher",
            Step::CriticResearcher => "critic_researcher",
            Step::Expert => "expert",
            Step::CriticExpert => "critic_expert",
            Step::Finalizer => "finalizer",
            Step::Error => "error_handler",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageType {
    Instruction,
    Response,
}

/// A message between the orchestrator and an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub sender: String,
    pub receiver: String,
    #[serde(rename = "type")]
    pub kind: MessageType,
    pub content: String,
    pub step_id: Option<u32>,
}

impl Message {
    pub fn instruction(receiver: Step, content: impl Into<String>, step_id: Option<u32>) -> Self {
        Self {
            sender: "orchestrator".into(),
            receiver: receiver.as_str().into(),
            kind: MessageType::Instruction,
            content: content.into(),
            step_id,
        }
    }

    pub fn response(sender: Step, content: impl Into<String>, step_id: Option<u32>) -> Self {
        Self {
            sender: sender.as_str().into(),
            receiver: "orchestrator".into(),
            kind: MessageType::Response,
            content: content.into(),
            step_id,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub research_steps: Vec<String>,
    pub expert_steps: Vec<String>,
    /// Plans made so far, this one included.
    pub attempt: u32,
}

impl Plan {
    /// The plan as the planner's critic reads it.
    pub fn render(&self) -> String {
        let mut text = String::from("Research steps:\n");
        for (i, step) in self.research_steps.iter().enumerate() {
            text.push_str(&format!("{}. {step}\n", i + 1));
        }
        text.push_str("Expert steps:\n");
        for (i, step) in self.expert_steps.iter().enumerate() {
            text.push_str(&format!("{}. {step}\n", i + 1));
        }
        text
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Approve,
    Reject,
}

/// A critic's decision on a piece of work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Verdict {
    pub decision: Decision,
    /// Why; for a rejection, what to do better (given to the agent on its retry).
    #[schemars(length(max = 300))]
    pub feedback: String,
}

/// A passage a research result rests on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Citation {
    pub document_id: String,
    pub title: String,
    pub passage: u32,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepResult {
    pub answer: String,
    pub citations: Vec<Citation>,
}

/// One research step of the plan: its researcher's own state (the instruction it works to,
/// its tool calls) and what the researcher and its critic made of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub index: u32,
    pub description: String,
    /// The instruction of the latest attempt: the step itself, or the critic's feedback.
    pub instruction: String,
    /// Attempts so far.
    pub attempts: u32,
    pub result: Option<StepResult>,
    /// The critic's verdict on `result`; `None` until it has reviewed it.
    pub verdict: Option<Verdict>,
    /// The researcher's tool calls in its latest attempt.
    pub transcript: Vec<ToolUse>,
}

impl StepRecord {
    pub fn approved(&self) -> bool {
        self.verdict.as_ref().is_some_and(|v| v.decision == Decision::Approve)
    }

    /// Awaiting its researcher: never researched, or rejected.
    pub fn needs_research(&self) -> bool {
        self.result.is_none() || self.verdict.as_ref().is_some_and(|v| v.decision == Decision::Reject)
    }

    /// Awaiting its critic.
    pub fn needs_review(&self) -> bool {
        self.result.is_some() && self.verdict.is_none()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpertAnswer {
    pub answer: String,
    pub reasoning: String,
    pub attempt: u32,
    /// The expert's tool calls (calculations).
    pub transcript: Vec<ToolUse>,
}

/// How a research ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    #[default]
    Running,
    Answered,
    RetryLimit,
    Failed,
}

/// The answer given when the retry limit is reached, as the design words it.
pub const NOT_ANSWERED: &str = "The question could not be answered.";
