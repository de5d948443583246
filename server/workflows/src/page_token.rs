//! Page tokens: the one codec for every paged listing (`ListConversations`, `ListTickets`).
//!
//! A token is opaque to callers: the base64url encoding (no padding) of a small versioned JSON
//! structure naming the listing it belongs to, the query it pages (so a token cannot be replayed
//! against another customer, filter or listing) and the listing's own position. A token that
//! does not decode, is of another version, or belongs to another listing or query is the
//! caller's mistake: `InvalidArgument` on `page_token`, never a store failure to retry.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::WorkflowError;

/// The token format this release writes and reads.
const VERSION: u32 = 1;

/// Tokens are short; anything much longer is not one of ours and is refused before decoding.
const MAX_TOKEN_BYTES: usize = 1024;

#[derive(Serialize, Deserialize)]
struct Token<P> {
    v: u32,
    /// The listing, e.g. `tickets`.
    l: String,
    /// The query the listing answered, e.g. the customer and status filter.
    q: String,
    /// Where the next page starts, in the listing's own terms.
    p: P,
}

fn invalid(reason: impl Into<String>) -> WorkflowError {
    WorkflowError::InvalidArgument { field: "page_token", reason: reason.into() }
}

/// The token for the page after `position` of `listing` answering `query`.
pub fn encode<P: Serialize>(listing: &str, query: &str, position: &P) -> String {
    let token = Token { v: VERSION, l: listing.to_owned(), q: query.to_owned(), p: position };
    // Serializing plain strings and numbers cannot fail.
    let json = serde_json::to_vec(&token).unwrap_or_default();
    URL_SAFE_NO_PAD.encode(json)
}

/// The position a token of `listing` for `query` holds; `None` for no token (the first page).
pub fn decode<P: DeserializeOwned>(
    listing: &str,
    query: &str,
    token: Option<&str>,
) -> Result<Option<P>, WorkflowError> {
    let Some(token) = token.filter(|t| !t.is_empty()) else { return Ok(None) };
    if token.len() > MAX_TOKEN_BYTES {
        return Err(invalid("is not a page token returned by this listing"));
    }
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| invalid("is not a page token returned by this listing"))?;
    let Token { v, l, q, p } = serde_json::from_slice::<Token<serde_json::Value>>(&bytes)
        .map_err(|_| invalid("is not a page token returned by this listing"))?;
    if v != VERSION {
        return Err(invalid(format!("has version {v}; this server reads version {VERSION}")));
    }
    if l != listing || q != query {
        return Err(invalid("belongs to another listing or query; pass the same request fields as the first page"));
    }
    // No token this server hands out holds a NUL (ids and keys never do), and a position with
    // one would reach the store, where PostgreSQL refuses it as a store failure.
    if holds_nul(&p) {
        return Err(invalid("is not a page token returned by this listing"));
    }
    serde_json::from_value(p).map(Some).map_err(|_| invalid("is not a page token returned by this listing"))
}

/// Whether any string in `value`, its object keys included, holds a NUL.
fn holds_nul(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::String(s) => s.contains('\0'),
        serde_json::Value::Array(items) => items.iter().any(holds_nul),
        serde_json::Value::Object(fields) => fields.iter().any(|(key, value)| key.contains('\0') || holds_nul(value)),
        serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct At {
        ms: i64,
        id: String,
    }

    fn field(error: WorkflowError) -> &'static str {
        match error {
            WorkflowError::InvalidArgument { field, .. } => field,
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn round_trips_and_is_url_safe() {
        let at = At { ms: 1_700_000_000_000, id: "TKT-1/é".into() };
        let token = encode("tickets", "CUST-1/resolved", &at);
        assert!(token.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{token}");
        assert_eq!(decode::<At>("tickets", "CUST-1/resolved", Some(&token)).unwrap(), Some(at));
        assert_eq!(decode::<At>("tickets", "CUST-1/resolved", None).unwrap(), None);
        assert_eq!(decode::<At>("tickets", "CUST-1/resolved", Some("")).unwrap(), None);
    }

    #[test]
    fn garbage_other_versions_and_other_queries_are_invalid_arguments() {
        let token = encode("tickets", "CUST-1/", &At { ms: 1, id: "a".into() });
        for bad in ["garbage!", "Z2FyYmFnZQ", "1700000000000:TKT-1", &"A".repeat(2000)] {
            assert_eq!(field(decode::<At>("tickets", "CUST-1/", Some(bad)).unwrap_err()), "page_token", "{bad}");
        }
        assert_eq!(field(decode::<At>("tickets", "CUST-2/", Some(&token)).unwrap_err()), "page_token");
        assert_eq!(field(decode::<At>("conversations", "CUST-1/", Some(&token)).unwrap_err()), "page_token");
        assert_eq!(field(decode::<String>("tickets", "CUST-1/", Some(&token)).unwrap_err()), "page_token");
        let v2 = URL_SAFE_NO_PAD.encode(r#"{"v":2,"l":"tickets","q":"CUST-1/","p":{"ms":1,"id":"a"}}"#);
        assert_eq!(field(decode::<At>("tickets", "CUST-1/", Some(&v2)).unwrap_err()), "page_token");
    }

    /// A token is the caller's to send back, so one can be made up: a NUL in its position would
    /// reach the store.
    #[test]
    fn a_position_holding_a_nul_is_an_invalid_argument() {
        let forged = encode("tickets", "CUST-1/", &At { ms: 1, id: "TKT-\0".into() });
        assert_eq!(field(decode::<At>("tickets", "CUST-1/", Some(&forged)).unwrap_err()), "page_token");
        let forged = encode("research", "default", &["RES-1", "\0"]);
        assert_eq!(field(decode::<Vec<String>>("research", "default", Some(&forged)).unwrap_err()), "page_token");
    }
}
