//! Page tokens: decoding never panics and refuses everything that is not a token of the same
//! listing and query with `InvalidArgument` on `page_token`; encoding round-trips (a position
//! holding a NUL, which no listing writes, is refused), and a token is URL-safe.

#![no_main]

use arbitrary::Arbitrary;
use frontdesk_workflows::{page_token, WorkflowError};
use libfuzzer_sys::fuzz_target;
use serde::{Deserialize, Serialize};

/// A listing position as the listings keep one: a timestamp and an id.
#[derive(Debug, Clone, PartialEq, Arbitrary, Serialize, Deserialize)]
struct At {
    ms: i64,
    id: String,
}

#[derive(Debug, Arbitrary)]
struct Input {
    listing: String,
    query: String,
    position: At,
    /// Some other query, to replay the token against.
    other_query: String,
    /// A caller's token, anything at all.
    token: String,
}

/// Same limit as the codec: longer tokens are refused before decoding.
const MAX_TOKEN_BYTES: usize = 1024;

fn refused<T: std::fmt::Debug>(result: Result<T, WorkflowError>, what: &str) {
    match result {
        Err(WorkflowError::InvalidArgument { field: "page_token", .. }) => {}
        other => panic!("{what}: expected InvalidArgument on page_token, got {other:?}"),
    }
}

fuzz_target!(|input: Input| {
    let Input { listing, query, position, other_query, token } = input;

    // Arbitrary tokens: decode to a position, to none (the empty token) or to InvalidArgument.
    match page_token::decode::<At>(&listing, &query, Some(&token)) {
        Ok(None) => assert!(token.is_empty(), "only the empty token means the first page"),
        Ok(Some(_)) => {
            assert!(token.len() <= MAX_TOKEN_BYTES);
            // A token that decodes belongs to this listing and query only.
            if other_query != query {
                refused(page_token::decode::<At>(&listing, &other_query, Some(&token)), "replayed caller token");
            }
        }
        Err(e) => refused::<()>(Err(e), "caller token"),
    }
    // Any other position type reads a token as garbage, never panicking.
    let _ = page_token::decode::<serde_json::Value>(&listing, &query, Some(&token));
    assert_eq!(page_token::decode::<At>(&listing, &query, None).unwrap(), None);

    // Tokens we write: URL-safe, and they read back as the position they hold. A position
    // holding a NUL is never one the server writes (no id holds one), so a token with one was
    // made up, and is refused before it reaches the store.
    let written = page_token::encode(&listing, &query, &position);
    assert!(!written.is_empty());
    assert!(written.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{written}");
    if written.len() <= MAX_TOKEN_BYTES && position.id.contains('\0') {
        refused(page_token::decode::<At>(&listing, &query, Some(&written)), "a position holding a NUL");
    } else if written.len() <= MAX_TOKEN_BYTES {
        let read = page_token::decode::<At>(&listing, &query, Some(&written));
        assert_eq!(read.unwrap(), Some(position.clone()), "round trip of {written}");
        if other_query != query {
            refused(page_token::decode::<At>(&listing, &other_query, Some(&written)), "another query");
        }
        let other_listing = format!("{listing}x");
        refused(page_token::decode::<At>(&other_listing, &query, Some(&written)), "another listing");
        // A token cut short loses the end of its JSON: it never reads as some position.
        let truncated = &written[..written.len() - 1];
        if let Ok(Some(p)) = page_token::decode::<At>(&listing, &query, Some(truncated)) {
            panic!("a truncated token decoded to {p:?}");
        }
    } else {
        refused(page_token::decode::<At>(&listing, &query, Some(&written)), "an oversized token");
    }
});
