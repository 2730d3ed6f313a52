//! The catalog of provider secret formats, as data (issue 32 §1).
//!
//! Each entry is one provider family: the label redaction writes (`[redacted:LABEL]`), the
//! keywords that must occur for its pattern to be worth running, the pattern itself, and the
//! samples the tests hold it to. Redaction finds every keyword in one pass over the text and
//! runs only the families whose keywords occur, each in a window around its hits, so the
//! number of families does not multiply the cost of a reply without secrets.
//!
//! Every entry cites where its format comes from (a vendor's documentation, or a rule of the
//! public scanners: gitleaks, trufflehog, detect-secrets, GitHub secret scanning) in a comment
//! above it. Samples are synthetic: the right prefix, length and alphabet, never a real
//! credential.

/// One provider's secret format.
#[derive(Debug, Clone, Copy)]
pub struct Family {
    /// What redaction writes in place of a match: `[redacted:<label>]`. Lower case, words
    /// joined by `-`, unique in [`FAMILIES`].
    pub label: &'static str,
    /// Literal strings, in lower case. Every match of [`Family::pattern`] contains at least
    /// one of them (compared without regard to ASCII case), so text without any of them
    /// cannot hold a match and the pattern never runs on it.
    pub keywords: &'static [&'static str],
    /// A `regex-lite` pattern for the secret. When the pattern has a capture group named
    /// `secret`, only that group is the secret (the rest is context that stays in the text);
    /// otherwise the whole match is.
    pub pattern: &'static str,
    /// The longest match in bytes: the window around a keyword hit that the pattern needs.
    pub max_len: usize,
    /// Synthetic secrets of this format: each must be found whole in any ordinary context
    /// (prose, a code block, a list item).
    pub positives: &'static [&'static str],
    /// Strings that look close but are not secrets of this format: none may be found.
    pub near_misses: &'static [&'static str],
}

/// Every provider family, grouped by provider, in no meaningful order.
pub static FAMILIES: &[Family] = &[
    // GitHub classic personal access token: `ghp_` + 36 base62 characters.
    // Source: GitHub docs, "About authentication to GitHub" (token formats);
    // gitleaks rule `github-pat`.
    Family {
        label: "github-pat",
        keywords: &["ghp_"],
        pattern: r"\bghp_[0-9A-Za-z]{36}\b",
        max_len: 40,
        positives: &["ghp_R2vB7qLx0Pz9Ws4Kd1Tn6Hy3Mj8Fc5Ue0Ao2"],
        near_misses: &["ghp_short", "ghp_R2vB7qLx0Pz9Ws4Kd1Tn6Hy3Mj8Fc5Ue0Ao2Zx9"],
    },
    // Stripe secret and restricted keys: `sk_live_` / `rk_live_` (and `_test_`) + 24 or
    // more base62 characters. Source: Stripe docs, "API keys"; gitleaks rule
    // `stripe-access-token`.
    Family {
        label: "stripe",
        keywords: &["sk_live_", "sk_test_", "rk_live_", "rk_test_"],
        pattern: r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{24,99}\b",
        max_len: 107,
        positives: &["sk_live_51Hx8QyL2mN4pR7sT9vW1zA3cE5gI7kM9oQ"],
        near_misses: &["sk_live_", "sk_live_short123"],
    },
];
