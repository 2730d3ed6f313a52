//! The one wrapper for a credential (a bot token, an app-level token) in every transport.
//!
//! Why one type: a token in an error, a `diagnose` line or a log is a token handed to
//! whoever reads them (I18). Three platform crates each had their own wrapper (`Token`
//! twice, `Secret` once) with the same rules written three times; a fourth platform
//! copying one of them could copy an older, weaker version. The rules, in one place:
//! trimmed on construction (a token exported with a trailing newline is still the token),
//! no `Display` (it cannot be formatted into a message by accident), a `Debug` that prints
//! a placeholder, and [`Secret::scrub`] for every text a server sends back before it is
//! kept in an error.

use std::sync::Arc;

/// A credential. Cheap to clone (shared, never copied into new strings), shown only
/// through [`Secret::expose`], which its one destination (a header, a request URL, a
/// gateway's IDENTIFY) calls.
#[derive(Clone)]
pub struct Secret(Arc<str>);

impl Secret {
    /// Wraps `value`, trimmed: the white space around a pasted or exported token is never
    /// part of it, and a request with it would only be refused.
    pub fn new(value: &str) -> Secret {
        Secret(Arc::from(value.trim()))
    }

    /// The credential itself, for the header, URL or handshake it is meant for and
    /// nothing else.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether there is no credential at all (an unset variable).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `text` with every occurrence of the credential replaced by `<token>`: for what a
    /// server said (an error description, an echoed path) before it goes into an error.
    pub fn scrub(&self, text: &str) -> String {
        if self.0.is_empty() {
            text.to_owned()
        } else {
            text.replace(&*self.0, "<token>")
        }
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<hidden>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "123456:SECRET-abc_DEF";

    #[test]
    fn a_secret_is_trimmed_when_made() {
        let secret = Secret::new(&format!(" \t{TOKEN}\n"));
        assert_eq!(secret.expose(), TOKEN);
        assert!(Secret::new(" \n").is_empty());
    }

    #[test]
    fn a_secret_never_prints() {
        let secret = Secret::new(TOKEN);
        let debug = format!("{secret:?}");
        let pretty = format!("{secret:#?}");
        let nested = format!("{:?}", Some(vec![secret.clone()]));
        for shown in [&debug, &pretty, &nested] {
            assert!(!shown.contains("SECRET"), "{shown}");
        }
        assert_eq!(debug, "Secret(<hidden>)");
    }

    #[test]
    fn a_secret_is_scrubbed_from_server_text() {
        let secret = Secret::new(TOKEN);
        assert_eq!(
            secret.scrub(&format!("bad path /bot{TOKEN}/x and {TOKEN} again")),
            "bad path /bot<token>/x and <token> again"
        );
        // An empty secret replaces nothing (replacing "" would interleave every character).
        assert_eq!(Secret::new("").scrub("abc"), "abc");
    }
}
