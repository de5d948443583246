//! The customer directory the triage supervisor looks customers up in (docs/workflows/triage.md's
//! `customer_lookup` tool): plan, tenure, seats, region and account status per customer id.
//!
//! The directory is a JSON Lines file, one customer per line. Frontdesk ships sample data
//! (`config/triage/customers.jsonl`); deployments replace it with their own export.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::WorkflowError;

/// The customer directory shipped with Frontdesk (`config/triage/customers.jsonl`).
pub const SHIPPED: &str = include_str!("../../../../config/triage/customers.jsonl");

/// One customer, as the supervisor sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Customer {
    pub customer_id: String,
    pub name: String,
    pub plan: Plan,
    pub tenure_months: u32,
    pub seats: u32,
    /// Such as `us-west`, `emea` or `apac`.
    pub region: String,
    pub account_status: AccountStatus,
    pub email: String,
    /// ISO 639-1 code, such as `en` or `de`.
    pub preferred_language: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Plan {
    Free,
    Pro,
    Enterprise,
}

impl Plan {
    pub fn as_str(self) -> &'static str {
        match self {
            Plan::Free => "free",
            Plan::Pro => "pro",
            Plan::Enterprise => "enterprise",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccountStatus {
    Active,
    PastDue,
    Suspended,
}

impl AccountStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            AccountStatus::Active => "active",
            AccountStatus::PastDue => "past_due",
            AccountStatus::Suspended => "suspended",
        }
    }
}

/// What is wrong with a JSON Lines data file (the source of a [`WorkflowError::Config`]).
/// Line numbers are 1-based.
#[derive(Debug, thiserror::Error)]
pub enum DataProblem {
    #[error("line {line}: {error}")]
    BadLine { line: usize, error: serde_json::Error },
    #[error("line {line}: {what} {id:?} appears twice")]
    Duplicate { line: usize, what: &'static str, id: String },
    #[error("line {line}: {what} has an empty {field}")]
    Empty { line: usize, what: &'static str, field: &'static str },
    #[error("the file has no {what}s")]
    NoRecords { what: &'static str },
}

/// Parses JSON Lines into records, rejecting empty or repeated ids. Blank lines and a leading
/// byte order mark are skipped. `id` returns a record's id and `what` names the record kind in errors.
pub(crate) fn parse_jsonl<T: DeserializeOwned>(
    text: &str,
    origin: &str,
    what: &'static str,
    id: impl Fn(&T) -> &str,
) -> Result<Vec<T>, WorkflowError> {
    let fail = |problem: DataProblem| WorkflowError::Config { path: origin.to_owned(), source: problem.into() };
    let mut records = Vec::new();
    let mut seen = HashSet::new();
    // Spreadsheet exports often start with a byte order mark.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let raw = raw.trim();
        if raw.is_empty() {
            continue;
        }
        let record: T = serde_json::from_str(raw).map_err(|error| fail(DataProblem::BadLine { line, error }))?;
        let record_id = id(&record);
        if record_id.trim().is_empty() {
            return Err(fail(DataProblem::Empty { line, what, field: "id" }));
        }
        if !seen.insert(record_id.to_owned()) {
            return Err(fail(DataProblem::Duplicate { line, what, id: record_id.to_owned() }));
        }
        records.push(record);
    }
    if records.is_empty() {
        return Err(fail(DataProblem::NoRecords { what }));
    }
    Ok(records)
}

/// Reads a data file, reporting a missing or unreadable file as a configuration error.
pub(crate) fn read_data(path: &Path) -> Result<String, WorkflowError> {
    std::fs::read_to_string(path)
        .map_err(|e| WorkflowError::Config { path: path.display().to_string(), source: e.into() })
}

/// Customers by id. Immutable once loaded, so it can be shared (`Arc`) across tasks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CustomerDirectory {
    customers: Vec<Customer>,
    by_id: HashMap<String, usize>,
}

impl CustomerDirectory {
    /// The sample directory shipped with Frontdesk.
    pub fn shipped() -> Self {
        Self::parse(SHIPPED, "config/triage/customers.jsonl").expect("the shipped customer directory is valid")
    }

    pub fn load(path: &Path) -> Result<Self, WorkflowError> {
        let text = read_data(path)?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses JSON Lines, one customer per line; `origin` names the source in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, WorkflowError> {
        let customers = parse_jsonl(text, origin, "customer", |c: &Customer| &c.customer_id)?;
        Ok(Self::from_customers(customers))
    }

    /// Builds a directory from customers already in memory; a repeated id keeps the last one.
    pub fn from_customers(customers: Vec<Customer>) -> Self {
        let mut directory = Self::default();
        for customer in customers {
            match directory.by_id.get(&customer.customer_id) {
                Some(&at) => directory.customers[at] = customer,
                None => {
                    directory.by_id.insert(customer.customer_id.clone(), directory.customers.len());
                    directory.customers.push(customer);
                }
            }
        }
        directory
    }

    pub fn lookup(&self, customer_id: &str) -> Option<&Customer> {
        self.by_id.get(customer_id).map(|&at| &self.customers[at])
    }

    /// All customers, in file order.
    pub fn customers(&self) -> &[Customer] {
        &self.customers
    }

    pub fn len(&self) -> usize {
        self.customers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.customers.is_empty()
    }
}
