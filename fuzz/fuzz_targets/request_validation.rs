//! Request validation: conversation ids, turns, and triage requests, customer ids and ticket ids.
//!
//! Each validator is checked against an independent statement of the rule it documents: it
//! accepts exactly the inputs the rule accepts, a refusal is `InvalidArgument` naming the field
//! that broke the rule (the first, in the validator's order), and accepted text is the trimmed,
//! non-empty input within the limit.

#![no_main]

use arbitrary::Arbitrary;
use frontdesk_workflows::{
    conversation::{validate_id, validate_turn},
    triage::{validate_customer_id, validate_request, validate_ticket_id, TriageRequest},
    Tenant, WorkflowError,
};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input {
    conversation_id: String,
    text: String,
    idempotency_key: Option<String>,
    /// Small limits reach the boundary; 0 refuses every text.
    max_text_chars: u8,
    customer_id: String,
    ticket_id: String,
    message: String,
    subject: Option<String>,
    language: Option<String>,
    triage_key: Option<String>,
}

/// The field an `InvalidArgument` names; any other error breaks the validators' contract.
fn field(result: Result<(), WorkflowError>) -> Option<&'static str> {
    match result {
        Ok(()) => None,
        Err(WorkflowError::InvalidArgument { field, .. }) => Some(field),
        Err(other) => panic!("a validator returned {other:?}, not InvalidArgument"),
    }
}

/// 1 to `max` bytes, each from `alphabet` or ASCII alphanumeric.
fn in_alphabet(id: &str, max: usize, alphabet: &[u8]) -> bool {
    !id.is_empty() && id.len() <= max && id.bytes().all(|b| b.is_ascii_alphanumeric() || alphabet.contains(&b))
}

fn key_ok(key: Option<&str>) -> bool {
    key.is_none_or(|k| !k.is_empty() && k.len() <= 128 && !k.chars().any(char::is_control))
}

fuzz_target!(|input: Input| {
    let max = usize::from(input.max_text_chars);

    // Conversation ids: 1 to 128 characters of A-Z a-z 0-9 . _ : -
    let id_ok = in_alphabet(&input.conversation_id, 128, b"._:-");
    let got = field(validate_id(&input.conversation_id));
    assert_eq!(got.is_none(), id_ok, "validate_id({:?})", input.conversation_id);
    if let Some(f) = got {
        assert_eq!(f, "conversation_id");
    }

    // Turns: the trimmed text, 1 to `max` characters without NUL; a key of 1 to 128 bytes
    // without control characters.
    let trimmed = input.text.trim();
    let expected_turn = if trimmed.is_empty() || trimmed.chars().count() > max || trimmed.contains('\0') {
        Some("text")
    } else if !key_ok(input.idempotency_key.as_deref()) {
        Some("idempotency_key")
    } else {
        None
    };
    match validate_turn(&input.text, input.idempotency_key.as_deref(), max) {
        Ok(text) => {
            assert_eq!(expected_turn, None, "validate_turn accepted {:?} / {:?}", input.text, input.idempotency_key);
            assert_eq!(text, trimmed, "the accepted text is the trimmed input");
            assert!(!text.is_empty() && text.chars().count() <= max);
            assert_eq!(text.trim(), text, "no surrounding whitespace remains");
            // The text is a slice of the caller's string, not a copy.
            let start = text.as_ptr() as usize - input.text.as_ptr() as usize;
            assert_eq!(&input.text[start..start + text.len()], text);
        }
        Err(WorkflowError::InvalidArgument { field, .. }) => {
            assert_eq!(
                Some(field),
                expected_turn,
                "validate_turn refused {:?} / {:?}",
                input.text,
                input.idempotency_key
            )
        }
        Err(other) => panic!("validate_turn returned {other:?}"),
    }

    // Customer ids: 1 to 64 characters of A-Z a-z 0-9 . _ - (never ':', the thread separator).
    let customer_ok = in_alphabet(&input.customer_id, 64, b"._-");
    let got = field(validate_customer_id(&input.customer_id));
    assert_eq!(got.is_none(), customer_ok, "validate_customer_id({:?})", input.customer_id);
    if customer_ok {
        assert!(!input.customer_id.contains(':'));
    }

    // Ticket ids: 1 to 64 bytes without ':' (the thread separator), '/' (the tenant's) or
    // control characters.
    let ticket_ok = !input.ticket_id.is_empty()
        && input.ticket_id.len() <= 64
        && !input.ticket_id.contains(':')
        && !input.ticket_id.contains('/')
        && !input.ticket_id.chars().any(char::is_control);
    let got = field(validate_ticket_id(&input.ticket_id));
    assert_eq!(got.is_none(), ticket_ok, "validate_ticket_id({:?})", input.ticket_id);
    if let Some(f) = got {
        assert_eq!(f, "ticket_id");
    }
    // A customer id and a ticket id that both pass make an unambiguous thread id, in every
    // tenant's key space: the tenant's key gives the caller's ids back, and no other tenant owns it.
    if customer_ok && ticket_ok {
        let thread = format!("{}:{}", input.customer_id, input.ticket_id);
        assert_eq!(thread.split_once(':'), Some((input.customer_id.as_str(), input.ticket_id.as_str())));
        let tenants = [Tenant::default(), Tenant::new("acme").unwrap(), Tenant::new("acme2").unwrap()];
        for owner in &tenants {
            let key = format!("{}:{}", owner.key(&input.customer_id), input.ticket_id);
            for other in &tenants {
                let seen = other.id(&key);
                assert_eq!(seen.is_some(), other == owner, "{other} sees {key:?} of {owner}");
                if let Some(id) = seen {
                    assert_eq!(id, thread);
                }
            }
        }
    }

    // Triage requests: the checks in order, the first failing one named.
    let message = input.message.trim();
    let expected_request = if !customer_ok {
        Some("customer_id")
    } else if message.is_empty() || message.chars().count() > max || message.contains('\0') {
        Some("message")
    } else if input.subject.as_ref().is_some_and(|s| s.chars().count() > 300 || s.contains('\0')) {
        Some("subject")
    } else if input.language.as_ref().is_some_and(|l| l.len() != 2 || !l.bytes().all(|b| b.is_ascii_lowercase())) {
        Some("language")
    } else if !key_ok(input.triage_key.as_deref()) {
        Some("idempotency_key")
    } else {
        None
    };
    let request = TriageRequest {
        customer_id: input.customer_id,
        message: input.message,
        subject: input.subject,
        language: input.language,
        idempotency_key: input.triage_key,
    };
    assert_eq!(field(validate_request(&request, max)), expected_request, "validate_request({request:?}, {max})");
});
