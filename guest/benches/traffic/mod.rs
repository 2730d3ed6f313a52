//! The texts the redaction figures are taken on, shared by the pipeline benchmark and the
//! instruction-count example (`guest/examples/redact_count.rs`), so both measure the same
//! traffic: agent-like markdown, the same with secrets planted as agents print them, and
//! prose full of trigger words.

/// Deterministic agent-like markdown of about `size` bytes: sections with prose, inline
/// markup, lists, code fences, a table and the odd emoji. It holds no secret and no trigger
/// word: the floor the realistic texts below are compared with.
pub fn agent_reply(size: usize) -> String {
    let mut out = String::with_capacity(size + 1024);
    let mut i = 0;
    while out.len() < size {
        out.push_str(&format!("## Step {i}: update `module_{i}.rs`\n\n"));
        out.push_str(&format!(
            "I changed **the parser** so that _nested_ blocks close correctly (see [issue {i}](https://example.com/issues/{i})). \
             The old code compared `a < b && c > d`, which failed for inputs over 4 KiB. All 42 tests pass now ✅.\n\n"
        ));
        out.push_str("- renamed `Token::Text` to `Token::Word`\n- removed the *unused* helper\n- kept the public API 🎉\n\n");
        out.push_str(&format!(
            "```rust\nfn step_{i}(input: &str) -> Result<Vec<Token>, Error> {{\n    let mut out = Vec::new();\n    for (n, line) in input.lines().enumerate() {{\n        out.push(Token::parse(line).map_err(|e| e.at(n))?);\n    }}\n    Ok(out)\n}}\n```\n\n"
        ));
        if i % 4 == 0 {
            out.push_str(
                "| file | lines |\n|---|---|\n| parser.rs | +120 |\n| lexer.rs | -34 |\n\n",
            );
        }
        i += 1;
    }
    out
}

/// Secrets as agents print them, one kind per planted slot in rotation, each in its
/// platform's real format (lengths and alphabets as issued).
pub const PLANTED: [&str; 10] = [
    "ghp_8fK2mQ9xLp4nR7tW1yB3vC6zD0aE5hJ2kS9u",
    "sk-proj-Zk3vQ9xLp2mN8rT4wY6uB1cD5eF7gH9jK0lM2nP4qR6sT8uV_x-Aa1Bb2Cc3Dd4",
    "xoxb-2718281828-3141592653589-AbCdEfGhIjKlMnOpQrStUvWx",
    "AKIAQWERTYUIOPASDFGH",
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "7123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ",
    "MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.GhIjKl.abcdefghijklmnopqrstuvwxyz0123456789AB",
    "sk-ant-api03-Qw3rTy7uIo9pAs1dFg5hJk8lZx2cVb4nM6qW0eR-tY_uI3oP5aS7dF9gH1jK",
    "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    "npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
];

/// One planted slot: a line an agent prints with a secret in it, in the context agents
/// print it in (a curl header, an export, a JSON field, a log line); with `None`, the same
/// line holding a harmless value in its place.
pub fn slot(n: usize, secret: Option<&str>) -> String {
    let s = secret.unwrap_or("$TOKEN_FROM_THE_VAULT");
    match n % 5 {
        0 => format!(
            "$ curl -sS -H \"Authorization: Bearer {s}\" https://api.example.com/v1/deploys/{n}\n"
        ),
        1 => match secret {
            Some(s) => format!("$ export SERVICE_API_KEY={s}\n"),
            None => "$ export SERVICE_BASE_URL=https://api.example.com/v1\n".to_owned(),
        },
        2 => format!("{{\"id\": {n}, \"access_token\": \"{s}\", \"token_type\": \"Bearer\"}}\n"),
        3 => format!(
            "2024-05-01T12:00:{:02}Z INFO push using {s} to origin\n",
            n % 60
        ),
        _ => format!("config: token = {s}  # from .env\n"),
    }
}

/// Realistic agent output of about `size` bytes, as the issue measured it: curl lines with
/// `Authorization:` headers, exports, diffs with `@@` lines near URLs, test output, JSON with
/// tokens. Every fourth section plants a secret (about ten per 64 KiB, of every kind in
/// turn) when `secrets` holds; otherwise the slot holds a harmless value. Also gives the
/// number of secrets planted.
pub fn realistic_reply(size: usize, secrets: bool) -> (String, usize) {
    let mut out = String::with_capacity(size + 2048);
    let mut planted = 0;
    let mut i = 0;
    while out.len() < size {
        out.push_str(&format!(
            "### Deploy check {i}\n\nI ran the health check against the staging API and read the logs. \
             The endpoint at https://api.example.com/v1/health answers 200, and the token refresh \
             works after the change to `client.ts` (see the diff below).\n\n"
        ));
        out.push_str(&format!(
            "```console\n$ curl -sS -H \"Authorization: Bearer $API_TOKEN\" -H \"Accept: application/json\" \\\n    \"https://api.example.com/v1/items?page={i}&per_page=50\"\n\
             {{\"items\":[{{\"id\":{i},\"name\":\"alpha\",\"url\":\"https://api.example.com/v1/items/{i}\"}}],\"next\":\"/v1/items?page={}\"}}\n```\n\n",
            i + 1
        ));
        out.push_str(&format!(
            "```diff\ndiff --git a/src/client.ts b/src/client.ts\nindex 3f2a1b4..8c9d0e1 100644\n--- a/src/client.ts\n+++ b/src/client.ts\n\
             @@ -{i},7 +{i},9 @@ export class Client {{\n-  const base = \"http://localhost:8080\";\n\
             +  const base = process.env.BASE_URL ?? \"https://api.example.com\";\n\
             +  const headers = {{ Authorization: `Bearer ${{token}}` }};\n   return fetch(`${{base}}/v1/items`, {{ headers }});\n```\n\n"
        ));
        out.push_str(&format!(
            "```text\nrunning 42 tests\ntest parser::tests::nested_blocks_{i} ... ok\ntest client::tests::refresh_token ... ok\n\
             test result: ok. 42 passed; 0 failed; 0 ignored; finished in 0.{i:02}s\n```\n\n"
        ));
        if i % 4 == 0 {
            let n = i / 4;
            let secret = secrets.then(|| PLANTED[n % PLANTED.len()]);
            planted += usize::from(secret.is_some());
            out.push_str("```\n");
            out.push_str(&slot(n, secret));
            out.push_str("```\n\n");
        }
        i += 1;
    }
    (out, planted)
}

/// Prose full of the words secret rules look for ("token", "key", "Bearer", "Authorization",
/// `API_KEY`, `sk-`, `://`), none of them a secret: redaction must not slow down on it.
pub fn trigger_words(size: usize) -> String {
    let paragraph = "The Bearer token goes in the Authorization header and the API key in X-Api-Key; \
        rotate the secret key, the token and the password every month. A token bucket limits each \
        key to 20 requests, and the refresh token outlives the access token. Set API_KEY and \
        SECRET_KEY in your shell, never in the repo, and pass a Bearer token of your own. The \
        task-runner (see the desk-top notes, ghp and npm docs) reads https://docs.example.com/auth \
        and mailto:ops@example.com. Keys: `token`, `key`, `secret`, `ACCESS_KEY`, `Bearer`.\n\n";
    paragraph.repeat(size / paragraph.len() + 1)
}
