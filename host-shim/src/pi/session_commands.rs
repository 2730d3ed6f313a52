//! Session commands typed in a chat (`/new`, `/compact`, `/model`, `/thinking`, `/usage`)
//! as pi understands them, shared by both agent modes. Pure: the RPC agent and the link
//! agent do the asking, these functions decide what a name means and what an answer says.

use serde_json::Value;

use crate::pi::rpc::Usage;
use crate::wit::agent::{ModelList, TokenUse};

/// pi's thinking levels, lowest first (`set_thinking_level`, `pi.setThinkingLevel`).
pub const THINKING_LEVELS: &[&str] = &["off", "minimal", "low", "medium", "high", "xhigh"];

/// A thinking level as pi spells it, or why the name is not one.
pub fn thinking_level(name: &str) -> Result<String, String> {
    let lower = name.trim().to_ascii_lowercase();
    if THINKING_LEVELS.contains(&lower.as_str()) {
        Ok(lower)
    } else {
        Err(format!(
            "'{}' is no thinking level; pi knows {}",
            name.trim(),
            THINKING_LEVELS.join(", ")
        ))
    }
}

/// The model `name` means among `available` (provider, id): `provider/id` exactly (any
/// case), else an id only one provider has. An id several providers have must be named
/// with its provider: switching to the wrong one would bill another account.
pub fn resolve_model(
    name: &str,
    available: &[(String, String)],
) -> Result<(String, String), String> {
    let name = name.trim();
    if name.is_empty() {
        return Err("name a model: /model provider/id".into());
    }
    let exact = available
        .iter()
        .find(|(provider, id)| format!("{provider}/{id}").eq_ignore_ascii_case(name));
    if let Some(found) = exact {
        return Ok(found.clone());
    }
    let by_id: Vec<&(String, String)> = available
        .iter()
        .filter(|(_, id)| id.eq_ignore_ascii_case(name))
        .collect();
    match by_id.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(format!(
            "pi has no model '{name}'; send /model to see the ones it has"
        )),
        several => Err(format!(
            "'{name}' is offered by several providers ({}); name it as provider/id",
            several
                .iter()
                .map(|(p, i)| format!("{p}/{i}"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The models as the bridge lists them: `provider/id`, pi's order.
pub fn model_list(current: Option<String>, available: &[(String, String)]) -> ModelList {
    ModelList {
        current,
        available: available
            .iter()
            .map(|(provider, id)| format!("{provider}/{id}"))
            .collect(),
    }
}

/// pi's usage figures as the interface's.
pub fn token_use(usage: Usage) -> TokenUse {
    TokenUse {
        input: usage.input,
        output: usage.output,
        cache_read: usage.cache_read,
        cache_write: usage.cache_write,
        cost_micros: usage.cost_micros,
    }
}

/// What a finished compaction says: how many tokens the summary replaced, when pi said.
pub fn compacted_text(data: Option<&Value>) -> String {
    match data
        .and_then(|d| d.get("tokensBefore"))
        .and_then(Value::as_u64)
    {
        Some(before) => {
            format!("Compacted: the conversation so far ({before} tokens) is now a summary.")
        }
        None => "Compacted: the conversation so far is now a summary.".into(),
    }
}

/// What the thinking level is after it was set: pi keeps `off` for a model that does not
/// reason, and the chat must hear that rather than the level it asked for.
pub fn thinking_text(asked: Option<&str>, now: Option<&str>) -> String {
    let now = now.unwrap_or("unknown");
    match asked {
        Some(asked) if asked != now => format!(
            "Thinking level: {now} (pi did not take '{asked}': this model does not support it)"
        ),
        _ => format!("Thinking level: {now}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn models() -> Vec<(String, String)> {
        [
            ("fake", "fake-model"),
            ("fake", "fake-model-2"),
            ("a", "shared"),
            ("b", "shared"),
        ]
        .iter()
        .map(|(p, i)| (p.to_string(), i.to_string()))
        .collect()
    }

    #[test]
    fn a_model_is_named_by_provider_and_id_or_by_an_id_of_its_own() {
        let m = models();
        assert_eq!(
            resolve_model("fake/fake-model-2", &m),
            Ok(("fake".into(), "fake-model-2".into()))
        );
        assert_eq!(
            resolve_model(" FAKE/Fake-Model ", &m),
            Ok(("fake".into(), "fake-model".into()))
        );
        assert_eq!(
            resolve_model("fake-model-2", &m),
            Ok(("fake".into(), "fake-model-2".into()))
        );
        assert_eq!(
            resolve_model("b/shared", &m),
            Ok(("b".into(), "shared".into()))
        );
        let both = resolve_model("shared", &m).unwrap_err();
        assert!(both.contains("a/shared, b/shared"), "{both}");
        let none = resolve_model("gpt-9", &m).unwrap_err();
        assert!(
            none.contains("no model 'gpt-9'") && none.contains("/model"),
            "{none}"
        );
        assert!(resolve_model("", &m).is_err());
    }

    #[test]
    fn thinking_levels_are_pis() {
        assert_eq!(thinking_level(" High "), Ok("high".into()));
        let wrong = thinking_level("max").unwrap_err();
        assert!(
            wrong.contains("off, minimal, low, medium, high, xhigh"),
            "{wrong}"
        );
        assert_eq!(
            thinking_text(Some("high"), Some("high")),
            "Thinking level: high"
        );
        assert!(thinking_text(Some("high"), Some("off")).contains("did not take 'high'"));
        assert_eq!(thinking_text(None, Some("low")), "Thinking level: low");
    }

    #[test]
    fn a_compaction_says_what_it_replaced() {
        let data = serde_json::json!({"summary": "…", "tokensBefore": 1200});
        assert!(compacted_text(Some(&data)).contains("1200 tokens"));
        assert!(compacted_text(None).starts_with("Compacted"));
    }

    #[test]
    fn models_are_listed_as_provider_and_id() {
        let list = model_list(Some("fake/fake-model".into()), &models()[..2]);
        assert_eq!(list.available, ["fake/fake-model", "fake/fake-model-2"]);
        assert_eq!(list.current.as_deref(), Some("fake/fake-model"));
    }
}
