//! Structured logs through tracing: human-readable text by default, JSON on request.

use std::io::IsTerminal;

use tracing_subscriber::{fmt, EnvFilter};

use crate::config::{LogConfig, LogFormat};

/// async-openai logs the whole body of a reply it cannot decode at `error`: the model's text,
/// and the user's words quoted in it, past `model.call_log`'s redaction. The failure reaches our
/// logs anyway, as the call's error (redacted as the call log is), so that line is always off.
const SILENCED: &str = "async_openai::error=off";

/// Installs the global subscriber. `RUST_LOG` wins over the configured filter.
pub fn init(config: &LogConfig) {
    let filter = filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&config.filter)));
    let ansi = use_colour(std::io::stderr().is_terminal(), std::env::var_os("NO_COLOR").as_deref());
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = match config.format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.with_ansi(ansi).try_init(),
    };
}

/// `base` with the targets that must never log ([`SILENCED`]) turned off.
fn filter(base: EnvFilter) -> EnvFilter {
    base.add_directive(SILENCED.parse().expect("a valid directive"))
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

    use super::{filter, use_colour};

    /// A writer into a shared buffer, for a subscriber under test.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_reply_async_openai_cannot_decode_is_never_logged_even_at_trace() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter(tracing_subscriber::EnvFilter::new("trace")))
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            // What async-openai 0.43 logs (src/error.rs, `map_deserialization_error`).
            tracing::error!(target: "async_openai::error", "failed deserialization of: {}", "the customer's words");
            tracing::error!(target: "frontdesk_llm::client", "model call failed");
        });
        let logged = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(!logged.contains("the customer's words"), "{logged}");
        assert!(logged.contains("model call failed"), "other errors are still logged: {logged}");
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(use_colour(true, None));
        assert!(!use_colour(false, None), "a file or a pipe gets plain text");
        assert!(!use_colour(true, Some(OsStr::new("1"))), "NO_COLOR wins");
        assert!(use_colour(true, Some(OsStr::new(""))), "an empty NO_COLOR is unset");
    }
}
