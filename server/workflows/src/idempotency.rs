//! Request fingerprints for idempotency keys. A key names one request: a retry with the key
//! must repeat that request, so the fingerprint of the fields that define it is kept with the
//! key, and a retry whose fingerprint differs is refused (`IDEMPOTENCY_MISMATCH`) instead of
//! being answered with another request's outcome.

use sha2::{Digest, Sha256};

use crate::WorkflowError;

/// The longest idempotency key accepted, in bytes.
pub const KEY_MAX: usize = 128;

/// An idempotency key as every workflow accepts it: 1 to [`KEY_MAX`] bytes without control
/// characters. (PostgreSQL refuses a NUL in a text value, so such a key would fail there as a
/// store error, and retrying would never help.)
pub fn validate_key(key: Option<&str>) -> Result<(), WorkflowError> {
    match key {
        Some(key) if key.is_empty() || key.len() > KEY_MAX || key.chars().any(char::is_control) => {
            Err(WorkflowError::InvalidArgument {
                field: "idempotency_key",
                reason: format!("must be 1 to {KEY_MAX} bytes without control characters"),
            })
        }
        _ => Ok(()),
    }
}

/// `sha256:` and the lowercase hex SHA-256 of a canonical encoding of `fields`: for each, the
/// name and the value, each preceded by its length in bytes (8 bytes, little-endian). Lengths
/// make the encoding unambiguous (no separator a value could contain), names make it
/// impossible for one field's value to pass for another's, and the `v1` label lets the
/// encoding change later without old and new fingerprints ever comparing equal by accident.
/// An absent optional field and an empty one are the same request, as they are on the wire.
pub fn fingerprint(fields: &[(&str, &str)]) -> String {
    let mut hash = Sha256::new();
    let mut put = |bytes: &[u8]| {
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(bytes);
    };
    put(b"frontdesk-request-v1");
    for (name, value) in fields {
        put(name.as_bytes());
        put(value.as_bytes());
    }
    let digest = hash.finalize();
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_short_and_printable() {
        assert!(validate_key(None).is_ok());
        assert!(validate_key(Some("turn-7")).is_ok());
        assert!(validate_key(Some(&"k".repeat(KEY_MAX))).is_ok());
        for bad in [String::new(), "k".repeat(KEY_MAX + 1), "a\0b".into(), "line\nbreak".into()] {
            let error = validate_key(Some(&bad)).unwrap_err();
            assert!(matches!(error, WorkflowError::InvalidArgument { field: "idempotency_key", .. }), "{bad:?}");
        }
    }

    #[test]
    fn equal_requests_agree_and_different_ones_do_not() {
        let a = fingerprint(&[("text", "hello"), ("subject", "")]);
        assert_eq!(a, fingerprint(&[("text", "hello"), ("subject", "")]));
        assert!(a.starts_with("sha256:") && a.len() == 7 + 64, "{a}");
        assert_ne!(a, fingerprint(&[("text", "hello!"), ("subject", "")]));
        // Moving bytes between fields changes the fingerprint: lengths delimit the values.
        assert_ne!(fingerprint(&[("a", "xy"), ("b", "")]), fingerprint(&[("a", "x"), ("b", "y")]));
        // So does giving a value to another field.
        assert_ne!(fingerprint(&[("subject", "x"), ("text", "")]), fingerprint(&[("subject", ""), ("text", "x")]));
    }
}
