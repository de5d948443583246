//! Structured logs through tracing: human-readable text by default, JSON on request.

use std::io::IsTerminal;

use tracing_subscriber::{fmt, EnvFilter};

use crate::config::{LogConfig, LogFormat};

/// Installs the global subscriber. `RUST_LOG` wins over the configured filter.
pub fn init(config: &LogConfig) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&config.filter));
    let ansi = use_colour(std::io::stderr().is_terminal(), std::env::var_os("NO_COLOR").as_deref());
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = match config.format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.with_ansi(ansi).try_init(),
    };
}

/// Whether text logs get ANSI colour codes. Only a terminal renders them: in a file, a pipe or a
/// log collector they are escape-sequence noise that breaks grep. A non-empty `NO_COLOR`
/// (<https://no-color.org>) turns colour off even on a terminal.
fn use_colour(stderr_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::use_colour;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(use_colour(true, None));
        assert!(!use_colour(false, None), "a file or a pipe gets plain text");
        assert!(!use_colour(true, Some(OsStr::new("1"))), "NO_COLOR wins");
        assert!(use_colour(true, Some(OsStr::new(""))), "an empty NO_COLOR is unset");
    }
}
