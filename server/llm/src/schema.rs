//! JSON schema generation for structured output, and tolerant JSON extraction from replies.

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// String formats OpenAI's strict mode accepts; others (schemars emits "uint32", "double", ...)
/// are dropped because strict mode rejects the whole schema on an unknown format.
const STRICT_FORMATS: &[&str] = &["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"];

/// JSON schema of `T`, shaped for OpenAI strict structured output.
///
/// * subschemas are inlined (no `$ref`/`$defs`) unless `T` is recursive, where that is impossible;
/// * every object gets `additionalProperties: false` and lists all its properties as `required`
///   (optional fields stay nullable through their `Option` type);
/// * `oneOf` becomes `anyOf`, and meta keys (`$schema`, `title`) and unsupported formats are dropped.
///
/// The same schema is fine for vLLM, Ollama and llama.cpp, which accept a superset.
pub fn schema_for<T: schemars::JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .for_deserialize()
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Value::Object(map) = &mut schema {
        map.remove("title");
    }
    make_strict(&mut schema);
    schema
}

/// The range of a fixed-width integer `format` as schemars writes it.
fn integer_bounds(format: &str) -> Option<(i64, i64)> {
    Some(match format {
        "uint8" => (0, i64::from(u8::MAX)),
        "uint16" => (0, i64::from(u16::MAX)),
        "uint32" => (0, i64::from(u32::MAX)),
        "int8" => (i64::from(i8::MIN), i64::from(i8::MAX)),
        "int16" => (i64::from(i16::MIN), i64::from(i16::MAX)),
        "int32" => (i64::from(i32::MIN), i64::from(i32::MAX)),
        _ => return None,
    })
}

pub(crate) fn make_strict(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("$schema");
            if let Some(one_of) = map.remove("oneOf") {
                map.insert("anyOf".to_owned(), one_of);
            }
            if let Some(Value::String(format)) = map.get("format") {
                if !STRICT_FORMATS.contains(&format.as_str()) {
                    // A fixed-width integer keeps its width as bounds, which strict mode accepts
                    // and a grammar-constrained model (llama.cpp) decodes within: no number the
                    // reply's type cannot hold.
                    if let Some((min, max)) = integer_bounds(format) {
                        map.entry("minimum").or_insert(Value::from(min));
                        map.entry("maximum").or_insert(Value::from(max));
                    }
                    map.remove("format");
                }
            }
            // A nullable object is typed `["object", "null"]`; strict mode wants it closed all the same.
            let is_object = match map.get("type") {
                Some(Value::String(t)) => t == "object",
                Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
                _ => false,
            } || map.contains_key("properties");
            // A map type (`additionalProperties` is a schema) cannot be made strict; leave it as is.
            let is_map = map.get("additionalProperties").is_some_and(Value::is_object);
            if is_object && !is_map {
                let names: Vec<Value> = match map.get("properties") {
                    Some(Value::Object(props)) => props.keys().cloned().map(Value::String).collect(),
                    _ => Vec::new(),
                };
                map.insert("required".to_owned(), Value::Array(names));
                if !map.contains_key("properties") {
                    map.insert("properties".to_owned(), Value::Object(Map::new()));
                }
                map.insert("additionalProperties".to_owned(), Value::Bool(false));
            }
            for (key, child) in map.iter_mut() {
                // Property names and enum/const values are data, not schemas; the rest may hold schemas.
                if key == "enum" || key == "const" || key == "required" || key == "default" || key == "examples" {
                    continue;
                }
                if key == "properties" || key == "$defs" || key == "definitions" {
                    if let Value::Object(children) = child {
                        children.values_mut().for_each(make_strict);
                    }
                    continue;
                }
                make_strict(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(make_strict),
        _ => {}
    }
}

/// A `response_format` schema name derived from a purpose: `[a-zA-Z0-9_-]`, at most 64 chars.
pub fn schema_name(purpose: &str) -> String {
    let mut name: String = purpose
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .take(64)
        .collect();
    if name.trim_matches('_').is_empty() {
        name = "response".to_owned();
    }
    name
}

/// Extracts the JSON value from a model reply.
///
/// Models wrap JSON in ```json fences or surround it with prose despite instructions, so this
/// accepts: the bare reply, the content of the first fenced block, or the first top-level
/// `{...}`/`[...]` that parses as a complete JSON value (trailing text after it is ignored).
/// Top-level means not inside an earlier bracket: a reply cut short inside its JSON
/// (`{"a": {"id": 1}, "b`) holds complete inner values, and returning one of them would pass a part
/// of the answer off as the whole, so such a reply is an error. Bracketed prose that is not
/// JSON (`use {curly} style`) is skipped.
pub fn extract_json(text: &str) -> Result<Value, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err("the reply is empty".to_owned());
    }
    if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
        return Ok(v);
    }
    if let Some(inner) = fenced_block(trimmed) {
        if let Ok(v) = serde_json::from_str::<Value>(inner.trim()) {
            return Ok(v);
        }
    }
    let mut first_error = None;
    let mut from = 0;
    while let Some(offset) = trimmed[from..].find(['{', '[']) {
        let start = from + offset;
        let mut stream = serde_json::Deserializer::from_str(&trimmed[start..]).into_iter::<Value>();
        let error = match stream.next() {
            Some(Ok(v)) if v.is_object() || v.is_array() => return Ok(v),
            Some(Err(e)) => e,
            _ => break,
        };
        // Running out of text means everything from here on is inside this unfinished value.
        let truncated = error.is_eof();
        first_error.get_or_insert_with(|| error.to_string());
        if truncated {
            break;
        }
        // Not JSON: resume after its closing bracket, so nothing nested in it counts as top-level.
        match closing_bracket_end(&trimmed[start..]) {
            Some(len) => from = start + len,
            None => break,
        }
    }
    Err(match first_error {
        Some(e) => format!("the reply is not valid JSON: {e}"),
        None => "the reply contains no JSON object".to_owned(),
    })
}

/// The length of the bracketed span `text` opens with (its first char is `{` or `[`), up to and
/// including the bracket that closes it; `None` when it never closes. Brackets inside
/// double-quoted strings do not count.
fn closing_bracket_end(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(i + c.len_utf8());
                }
            }
            _ => {}
        }
    }
    None
}

/// The content of the first ``` fenced block (language tag skipped), if any.
fn fenced_block(text: &str) -> Option<&str> {
    let open = text.find("```")?;
    let after = &text[open + 3..];
    let body_start = after.find('\n').map(|i| i + 1).unwrap_or(0);
    let body = &after[body_start..];
    let close = body.find("```").unwrap_or(body.len());
    Some(&body[..close])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[test]
    fn fixed_width_integers_keep_their_range_as_bounds() {
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Counts {
            steps: u32,
            delta: Option<i8>,
            small: u16,
        }
        let schema = schema_for::<Counts>();
        let bounds = |field: &str| {
            let f = &schema["properties"][field];
            assert!(f.get("format").is_none(), "strict mode rejects the format: {f}");
            (f["minimum"].as_i64(), f["maximum"].as_i64())
        };
        assert_eq!(bounds("steps"), (Some(0), Some(i64::from(u32::MAX))));
        assert_eq!(bounds("delta"), (Some(-128), Some(127)));
        assert_eq!(bounds("small"), (Some(0), Some(65_535)));
    }

    #[allow(dead_code)]
    #[derive(Deserialize, schemars::JsonSchema)]
    struct Inner {
        score: u32,
        note: Option<String>,
    }

    #[allow(dead_code)]
    #[derive(Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "snake_case")]
    enum Route {
        Billing,
        Tech,
    }

    #[allow(dead_code)]
    #[derive(Deserialize, schemars::JsonSchema)]
    struct Outer {
        route: Route,
        inner: Inner,
        items: Vec<Inner>,
    }

    fn walk(v: &Value, f: &mut impl FnMut(&Map<String, Value>)) {
        match v {
            Value::Object(m) => {
                f(m);
                m.values().for_each(|c| walk(c, f));
            }
            Value::Array(a) => a.iter().for_each(|c| walk(c, f)),
            _ => {}
        }
    }

    #[test]
    fn schema_is_strict_friendly() {
        let schema = schema_for::<Outer>();
        let text = schema.to_string();
        assert!(!text.contains("$ref"), "{text}");
        assert!(!text.contains("$defs"), "{text}");
        assert!(!text.contains("$schema"), "{text}");
        assert!(!text.contains("uint32"), "{text}");
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["required"], serde_json::json!(["route", "inner", "items"]));
        let inner = &schema["properties"]["inner"];
        assert_eq!(inner["additionalProperties"], false);
        assert_eq!(inner["required"], serde_json::json!(["score", "note"]));
        assert_eq!(schema["properties"]["items"]["items"]["additionalProperties"], false);
        let mut objects = 0;
        walk(&schema, &mut |m| {
            if m.get("type").is_some_and(|t| t == "object") {
                objects += 1;
                assert_eq!(m.get("additionalProperties"), Some(&Value::Bool(false)));
            }
            assert!(!m.contains_key("oneOf"));
        });
        assert_eq!(objects, 3);
        let routes = schema["properties"]["route"].to_string();
        assert!(routes.contains("billing") && routes.contains("tech"), "{routes}");
    }

    #[test]
    fn nullable_objects_are_made_strict_at_every_depth() {
        let mut schema = serde_json::json!({
            "type": "object",
            "properties": {
                "pet": {"type": ["object", "null"]},
                "visits": {
                    "type": ["array", "null"],
                    "items": {
                        "type": ["null", "object"],
                        "properties": {"slot": {"type": ["object", "null"]}, "note": {"type": ["string", "null"]}}
                    }
                },
                "tags": {"type": ["object", "null"], "additionalProperties": {"type": "string"}}
            }
        });
        make_strict(&mut schema);
        let closed = |s: &Value| {
            assert_eq!(s["additionalProperties"], false, "{s}");
            assert!(s["properties"].is_object() && s["required"].is_array(), "{s}");
        };
        let pet = &schema["properties"]["pet"];
        closed(pet);
        assert_eq!(pet["required"], serde_json::json!([]));
        let item = &schema["properties"]["visits"]["items"];
        closed(item);
        assert_eq!(item["required"], serde_json::json!(["slot", "note"]));
        closed(&item["properties"]["slot"]);
        let note = item["properties"]["note"].as_object().unwrap();
        assert!(!note.contains_key("additionalProperties") && !note.contains_key("required"), "{note:?}");
        assert!(schema["properties"]["visits"].get("additionalProperties").is_none());
        // A map stays a map.
        assert_eq!(schema["properties"]["tags"]["additionalProperties"], serde_json::json!({"type": "string"}));
    }

    #[test]
    fn schema_name_is_sanitized() {
        assert_eq!(schema_name("supervisor.route"), "supervisor_route");
        assert_eq!(schema_name("a b/c-d"), "a_b_c-d");
        assert_eq!(schema_name(""), "response");
        assert_eq!(schema_name("..."), "response");
        assert_eq!(schema_name(&"x".repeat(100)).len(), 64);
    }

    #[test]
    fn extracts_plain_json() {
        assert_eq!(extract_json(r#" {"a":1} "#).unwrap(), serde_json::json!({"a":1}));
    }

    #[test]
    fn extracts_fenced_json() {
        let reply = "Here you go:\n```json\n{\"a\": [1, 2]}\n```\nAnything else?";
        assert_eq!(extract_json(reply).unwrap(), serde_json::json!({"a":[1,2]}));
        let bare_fence = "```\n{\"b\": true}\n```";
        assert_eq!(extract_json(bare_fence).unwrap(), serde_json::json!({"b":true}));
    }

    #[test]
    fn extracts_json_surrounded_by_prose() {
        let reply = "Sure! {\"route\": \"billing\", \"why\": \"it says {invoice}\"} Hope that helps.";
        assert_eq!(extract_json(reply).unwrap()["route"], "billing");
        let braces_in_prose = "Use {curly} style: {\"ok\": 1}";
        assert_eq!(extract_json(braces_in_prose).unwrap(), serde_json::json!({"ok":1}));
    }

    #[test]
    fn rejects_non_json() {
        assert!(extract_json("").is_err());
        assert!(extract_json("no json here").is_err());
        let err = extract_json("{\"a\": ").unwrap_err();
        assert!(err.contains("not valid JSON"), "{err}");
    }

    #[test]
    fn a_truncated_reply_is_not_mistaken_for_an_inner_value() {
        let cut = r#"{"context_updates":{"appointment_details":{"id":"B1"},"assig"#;
        let err = extract_json(cut).unwrap_err();
        assert!(err.contains("not valid JSON"), "{err}");
        let fenced = "```json\n[{\"id\": 1}, {\"id\": 2}, {\"i";
        assert!(extract_json(fenced).is_err(), "{:?}", extract_json(fenced));
        let prose_then_cut = "Here it is: {\"a\": {\"b\": 1}, \"c\": [1, 2";
        assert!(extract_json(prose_then_cut).is_err(), "{:?}", extract_json(prose_then_cut));
    }

    #[test]
    fn a_value_nested_in_broken_json_is_not_taken_for_the_reply() {
        let broken = r#"{"route": billing, "details": {"id": "B1"}} and {curly"#;
        assert!(extract_json(broken).is_err(), "{:?}", extract_json(broken));
        // A bracket inside a string of skipped prose does not count.
        let skipped = r#"Use {curly "{" style} then {"ok": 1}"#;
        assert_eq!(extract_json(skipped).unwrap(), serde_json::json!({"ok": 1}));
    }
}
