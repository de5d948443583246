//! The intake workflow's configuration file: fields to collect and teams to route to.

use std::path::Path;

use serde::Deserialize;

use crate::WorkflowError;

/// The configuration shipped with Frontdesk (`config/intake.toml`).
pub const SHIPPED: &str = include_str!("../../../../config/intake.toml");

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntakeConfig {
    pub welcome: String,
    pub fields: Vec<FieldConfig>,
    pub teams: Vec<TeamConfig>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldConfig {
    pub name: String,
    pub label: String,
    pub description: String,
    #[serde(default = "yes")]
    pub required: bool,
    /// Filled in by the assistant rather than asked for.
    #[serde(default)]
    pub infer: bool,
    /// A typical value, used in the worked examples the elicitation agent is shown (small models
    /// copy the pattern of an example far better than they follow a description). Fields without
    /// one are left out of the examples.
    #[serde(default)]
    pub example: Option<String>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamConfig {
    pub id: String,
    pub name: String,
    pub description: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigProblem {
    #[error("no fields are configured")]
    NoFields,
    #[error("no teams are configured")]
    NoTeams,
    #[error("field {0:?} is configured twice")]
    DuplicateField(String),
    #[error("team {0:?} is configured twice")]
    DuplicateTeam(String),
    #[error("field name {0:?} must be lower_snake_case")]
    BadFieldName(String),
}

impl IntakeConfig {
    pub fn shipped() -> Self {
        Self::parse(SHIPPED, "config/intake.toml").expect("the shipped intake config is valid")
    }

    pub fn load(path: &Path) -> Result<Self, WorkflowError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| WorkflowError::Config { path: path.display().to_string(), source: e.into() })?;
        Self::parse(&text, &path.display().to_string())
    }

    pub fn parse(text: &str, path: &str) -> Result<Self, WorkflowError> {
        let config: IntakeConfig =
            toml::from_str(text).map_err(|e| WorkflowError::Config { path: path.to_owned(), source: e.into() })?;
        config.validate().map_err(|e| WorkflowError::Config { path: path.to_owned(), source: e.into() })?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigProblem> {
        if self.fields.is_empty() {
            return Err(ConfigProblem::NoFields);
        }
        if self.teams.is_empty() {
            return Err(ConfigProblem::NoTeams);
        }
        let mut seen = std::collections::BTreeSet::new();
        for field in &self.fields {
            let snake = !field.name.is_empty()
                && field.name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            if !snake {
                return Err(ConfigProblem::BadFieldName(field.name.clone()));
            }
            if !seen.insert(field.name.as_str()) {
                return Err(ConfigProblem::DuplicateField(field.name.clone()));
            }
        }
        let mut teams = std::collections::BTreeSet::new();
        for team in &self.teams {
            if !teams.insert(team.id.as_str()) {
                return Err(ConfigProblem::DuplicateTeam(team.id.clone()));
            }
        }
        Ok(())
    }

    pub fn field(&self, name: &str) -> Option<&FieldConfig> {
        self.fields.iter().find(|f| f.name == name)
    }

    pub fn team(&self, id: &str) -> Option<&TeamConfig> {
        self.teams.iter().find(|t| t.id == id)
    }
}
