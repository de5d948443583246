//! The intake workflow's configuration (`IntakeConfig::parse`, TOML) from arbitrary bytes: never
//! panics, refuses with `WorkflowError::Config`, and an accepted configuration has fields and
//! teams, lower_snake_case field names and no duplicate field or team.

#![no_main]

use std::collections::BTreeSet;

use frontdesk_workflows::{intake::config::IntakeConfig, WorkflowError};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match IntakeConfig::parse(text, "fuzz.toml") {
        Ok(config) => {
            assert!(!config.fields.is_empty() && !config.teams.is_empty());
            let fields: BTreeSet<&str> = config.fields.iter().map(|f| f.name.as_str()).collect();
            assert_eq!(fields.len(), config.fields.len(), "field names are unique");
            for name in &fields {
                assert!(!name.is_empty());
                assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'), "{name:?}");
                assert_eq!(config.field(name).map(|f| f.name.as_str()), Some(*name));
            }
            let teams: BTreeSet<&str> = config.teams.iter().map(|t| t.id.as_str()).collect();
            assert_eq!(teams.len(), config.teams.len(), "team ids are unique");
            for id in teams {
                assert_eq!(config.team(id).map(|t| t.id.as_str()), Some(id));
            }
        }
        Err(WorkflowError::Config { path, .. }) => assert_eq!(path, "fuzz.toml"),
        Err(other) => panic!("IntakeConfig::parse returned {other:?}, not a Config error"),
    }
});
