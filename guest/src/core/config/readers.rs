//! Generic readers for JSON config values, with the error texts the original used
//! (`expected a string, received number`), shared by the bridge and transport sections.

use serde_json::{Map, Value};

use super::Sink;
use crate::core::secrets::contains_secret;

/// JavaScript's `typeof` name, which the original's messages use (null and arrays are
/// "object").
pub(super) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Null | Value::Array(_) | Value::Object(_) => "object",
    }
}

/// What a range error says it received: the number as JavaScript prints it, otherwise
/// only the type, so an arbitrary string is not echoed into the terminal.
fn received(value: &Value) -> String {
    let Value::Number(number) = value else {
        return type_name(value).into();
    };
    match (number.as_i64(), number.as_u64(), number.as_f64()) {
        (Some(n), _, _) => n.to_string(),
        (_, Some(n), _) => n.to_string(),
        (_, _, Some(f)) if f.fract() == 0.0 && f.abs() < 1e21 => format!("{f:.0}"),
        (_, _, Some(f)) if f.abs() >= 1e21 => format!("{f:e}"),
        _ => number.to_string(),
    }
}

/// An integer in `min..=max` (JSON `5.0` counts, as `Number.isInteger` says it does).
pub(super) fn int_in(value: &Value, min: i64, max: i64) -> Result<i64, String> {
    match value.as_f64() {
        // The range check comes first, so the cast below cannot truncate.
        Some(f) if f.fract() == 0.0 && f >= min as f64 && f <= max as f64 => Ok(f as i64),
        _ => Err(format!(
            "expected an integer between {min} and {max}, received {}",
            received(value)
        )),
    }
}

/// A string, or the generic type error.
pub(super) fn string(value: &Value) -> Result<&str, String> {
    value
        .as_str()
        .ok_or_else(|| format!("expected a string, received {}", type_name(value)))
}

/// A boolean, or the generic type error.
pub(super) fn boolean(value: &Value) -> Result<bool, String> {
    value
        .as_bool()
        .ok_or_else(|| format!("expected a boolean, received {}", type_name(value)))
}

/// An array whose entries are all strings.
pub(super) fn strings(value: &Value) -> Result<Vec<String>, String> {
    let error = || "expected an array of strings".to_string();
    let items = value.as_array().ok_or_else(error)?;
    items
        .iter()
        .map(|item| item.as_str().map(String::from).ok_or_else(error))
        .collect()
}

/// A received enum value: the string in quotes, or the type of anything else.
pub(super) fn quoted_or_type(value: &Value) -> String {
    match value.as_str() {
        Some(text) => format!("\"{text}\""),
        None => type_name(value).into(),
    }
}

/// The entries of a nested bridge object, or the error that it is not one.
pub(super) fn nested<'v>(
    value: &'v Value,
    path: &str,
    sink: &mut Sink<'_>,
) -> Option<&'v Map<String, Value>> {
    let object = value.as_object();
    if object.is_none() {
        sink.error(format!("{path}: expected an object"));
    }
    object
}

/// Whether any string in `value`, object keys included, holds a secret shape: such a value
/// is refused whole, since applying it would put the secret in `/connect config` and in
/// every message that quotes the setting (I10).
pub(super) fn holds_secret(value: &Value) -> bool {
    match value {
        Value::String(text) => contains_secret(text),
        Value::Array(items) => items.iter().any(holds_secret),
        Value::Object(fields) => fields
            .iter()
            .any(|(key, item)| contains_secret(key) || holds_secret(item)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}
