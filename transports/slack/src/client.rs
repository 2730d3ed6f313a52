//! The Slack Web API over HTTP: one function per method, each with its own timeout and
//! retry rule (I32), errors a person can act on, and two tokens that never show.
//!
//! Slack specifics this module owns (docs/protocols.md#slack-sending to
//! docs/protocols.md#slack-files):
//! - every method is `POST <baseUrl>/<method>` with the token in the `Authorization`
//!   header (never in the URL or the body), so no URL in an error can carry it;
//! - `ok: false` is an error even with HTTP 200, and its `error` code decides what it means;
//! - HTTP 429 comes with `Retry-After` in seconds;
//! - file downloads send the bot token, so they go only to Slack's own hosts, and a
//!   redirect elsewhere is refused instead of followed with the token.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use transport_core::Secret;
use transport_core::capped::OverCap;
use transport_core::download::{DownloadFailure, Downloaded, read_capped};
use transport_core::http::{Failure, Retrier};
use transport_core::http_client::{USER_AGENT, describe, http_client, origin};
use transport_core::jitter::Jitter;
use transport_core::retry::{Outcome, RetryPolicy};

use crate::wire::{
    ApiAnswer, AuthTest, ConnectionsOpen, PostEphemeral, PostMessage, Posted, ReactionOnMessage,
    UpdateMessage,
};

/// How many redirects a download follows (all within Slack).
pub const MAX_REDIRECTS: usize = 3;

/// Whether `token` starts with `prefix` (`xoxb-`, `xapp-`) and can be sent in a header
/// (visible ASCII only). A token that fails this would only produce confusing
/// `invalid_auth` answers, or no request at all.
pub fn has_shape(token: &Secret, prefix: &str) -> bool {
    let token = token.expose();
    token.len() > prefix.len()
        && token.starts_with(prefix)
        && token.bytes().all(|b| b.is_ascii_graphic())
}

/// Which of the two tokens a call uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    /// The bot token (`xoxb-…`): every Web API method and file downloads.
    Bot,
    /// The app-level token (`xapp-…`): only `apps.connections.open`.
    App,
}

/// Why a Web API call failed, written for the person who has to fix it. No variant holds
/// a token (texts from the server are scrubbed before they are stored).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// The token was refused (`invalid_auth`, `not_authed`, `token_revoked`, ...).
    #[error(
        "Slack refused the {kind} in ${env} ({code}): it was revoked, regenerated or mistyped, or the app was removed from the workspace. Copy the current token from your app at https://api.slack.com/apps ({place}), export it as {env} again and restart"
    )]
    Unauthorized {
        /// `bot token` or `app-level token`.
        kind: &'static str,
        /// Name of the environment variable the token came from.
        env: String,
        /// Slack's error code.
        code: String,
        /// Where in the app's settings the token is.
        place: &'static str,
    },
    /// `not_allowed_token_type`: the two tokens were swapped, or a user token was given.
    #[error(
        "Slack {method} does not accept the kind of token in ${env} (not_allowed_token_type): it needs {expected}. Check that the bot token (xoxb-...) and the app-level token (xapp-...) are not swapped"
    )]
    WrongTokenType {
        /// The method called.
        method: &'static str,
        /// Name of the environment variable the token came from.
        env: String,
        /// What the method takes.
        expected: &'static str,
    },
    /// `missing_scope`: the app was not granted a scope the method needs.
    #[error(
        "Slack {method} needs the scope {needed}, which the app does not have: add it under OAuth & Permissions (or in the app manifest), reinstall the app to the workspace, export the new bot token and restart"
    )]
    MissingScope {
        /// The method called.
        method: &'static str,
        /// The scope Slack named.
        needed: String,
    },
    /// HTTP 429 (or `ratelimited`): wait as long as `Retry-After` says.
    #[error("Slack {method} was rate limited; Slack asks to wait {retry_after_ms} ms")]
    RateLimited {
        /// The method called.
        method: &'static str,
        /// `Retry-After`, in ms.
        retry_after_ms: u64,
    },
    /// Any other `ok: false`: the request itself was refused.
    #[error("Slack {method} was refused: {code}{hint}")]
    Refused {
        /// The method called.
        method: &'static str,
        /// Slack's error code (`channel_not_found`, `message_not_found`, ...).
        code: String,
        /// What to do about it, when known (starts with `; `), else empty.
        hint: String,
    },
    /// HTTP 5xx: Slack's side failed; retried with backoff.
    #[error("Slack {method} failed on Slack's side (HTTP {status})")]
    Server {
        /// The method called.
        method: &'static str,
        /// HTTP status.
        status: u16,
    },
    /// No answer within the request's timeout.
    #[error("Slack {method} got no answer within {seconds} s")]
    Timeout {
        /// The method called.
        method: &'static str,
        /// The timeout that passed.
        seconds: u64,
    },
    /// The connection failed or dropped (DNS, refused, reset, TLS).
    #[error("Slack {method} could not reach the Web API at {host}: {detail}")]
    Network {
        /// The method called.
        method: &'static str,
        /// The base URL's scheme, host and port, never a path.
        host: String,
        /// What the network stack said, without any URL.
        detail: String,
    },
    /// The answer was not a Web API answer (a proxy's error page, a wrong `baseUrl`).
    #[error(
        "Slack {method} answered with something that is not a Web API response (HTTP {status}): {detail}; check that baseUrl is https://slack.com/api"
    )]
    Malformed {
        /// The method called.
        method: &'static str,
        /// HTTP status.
        status: u16,
        /// What was wrong with it.
        detail: String,
    },
}

/// Error codes Slack documents as "try again": its side failed although HTTP said 200.
const TRANSIENT_CODES: &[&str] = &[
    "internal_error",
    "fatal_error",
    "service_unavailable",
    "request_timeout",
];

/// Codes that mean the token is not (or no longer) good.
const AUTH_CODES: &[&str] = &[
    "invalid_auth",
    "not_authed",
    "account_inactive",
    "token_revoked",
    "token_expired",
    "no_permission",
];

impl Failure for ApiError {
    fn outcome(&self) -> Outcome {
        match self {
            ApiError::RateLimited { retry_after_ms, .. } => Outcome::RateLimited {
                retry_after_ms: *retry_after_ms,
            },
            ApiError::Server { .. } | ApiError::Timeout { .. } | ApiError::Network { .. } => {
                Outcome::Transient
            }
            ApiError::Refused { code, .. } if TRANSIENT_CODES.contains(&code.as_str()) => {
                Outcome::Transient
            }
            // A proxy's HTML error page in the middle of an outage is as transient as a 502.
            ApiError::Malformed { status, .. } if *status >= 500 => Outcome::Transient,
            _ => Outcome::Fatal,
        }
    }
}

impl ApiError {
    /// Slack's error code, for the few a caller reacts to (`message_not_found`, ...).
    pub fn code(&self) -> Option<&str> {
        match self {
            ApiError::Refused { code, .. } | ApiError::Unauthorized { code, .. } => Some(code),
            ApiError::MissingScope { .. } => Some("missing_scope"),
            ApiError::WrongTokenType { .. } => Some("not_allowed_token_type"),
            _ => None,
        }
    }
}

/// What to do about a refusal, for the codes a bridge user meets.
fn hint(code: &str) -> &'static str {
    match code {
        "channel_not_found" => {
            "; the channel does not exist or the bot cannot see it (for a private channel, invite the bot with /invite)"
        }
        "not_in_channel" => "; invite the bot to the channel with /invite @<bot name>",
        "is_archived" => "; the channel is archived",
        "message_not_found" => "; the message to edit no longer exists",
        "cant_update_message" | "edit_window_closed" => "; Slack no longer lets the bot edit it",
        "msg_too_long" => "; the text is over Slack's limit",
        "no_text" => "; the text was empty",
        "restricted_action" => "; a workspace setting prevents the bot from posting here",
        "file_uploads_disabled" | "file_uploads_except_images_disabled" => {
            "; the workspace has turned file uploads off"
        }
        "file_upload_size_restricted" => "; the workspace restricts uploads of files this large",
        "file_type_not_allowed" => "; the workspace does not allow this type of file",
        _ => "",
    }
}

/// A file for [`WebApi::upload_file`].
#[derive(Debug, Clone, Copy)]
pub struct Upload<'a> {
    /// File name as Slack shows it.
    pub name: &'a str,
    /// Media type.
    pub media_type: &'a str,
    /// Plain text shared with it (`initial_comment`); empty for none.
    pub caption: &'a str,
    /// The bytes.
    pub data: &'a [u8],
}

/// `files.getUploadURLExternal`'s answer.
#[derive(Debug, serde::Deserialize)]
struct UploadTicket {
    upload_url: String,
    file_id: String,
}

/// `files.completeUploadExternal`'s arguments.
#[derive(Debug, Serialize)]
struct CompleteUpload<'a> {
    files: Vec<CompleteFile<'a>>,
    channel_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    thread_ts: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    initial_comment: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct CompleteFile<'a> {
    id: &'a str,
    title: &'a str,
}

/// Why an attachment could not be fetched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DownloadError {
    /// The reference is not a URL on a Slack host: the bot token is not sent there.
    #[error(
        "the attachment's address is not on a Slack file host ({host}); it was not downloaded, so the bot token never left Slack"
    )]
    NotSlack {
        /// The host named (never a path).
        host: String,
    },
    /// A redirect pointed off Slack.
    #[error(
        "Slack redirected the attachment download to {host}, which is not a Slack host; the redirect was not followed, so the bot token never left Slack"
    )]
    RedirectOffSlack {
        /// The redirect's host.
        host: String,
    },
    /// More than [`MAX_REDIRECTS`] redirects.
    #[error("the attachment download was redirected more than {MAX_REDIRECTS} times; stopped")]
    TooManyRedirects,
    /// The size the server declared, or the bytes received, are over the caller's limit.
    #[error(transparent)]
    TooLarge(#[from] OverCap),
    /// The file server answered with an error status.
    #[error(
        "the Slack file server answered HTTP {status} for this attachment (the file may be deleted, or the app lacks the files:read scope)"
    )]
    Status {
        /// HTTP status.
        status: u16,
    },
    /// The download itself failed.
    #[error(transparent)]
    Api(#[from] ApiError),
}

pub use transport_core::retry::Retry;

/// How the client is set up.
#[derive(Debug, Clone)]
pub struct ClientSettings {
    /// Web API base URL (`https://slack.com/api`).
    pub base_url: String,
    /// The bot token.
    pub bot_token: Secret,
    /// Its variable's name, for error messages.
    pub bot_token_env: String,
    /// The app-level token.
    pub app_token: Secret,
    /// Its variable's name, for error messages.
    pub app_token_env: String,
    /// Timeout of an ordinary request.
    pub request_timeout: Duration,
    /// Timeout of a file download.
    pub download_timeout: Duration,
    /// Retries within one call.
    pub policy: RetryPolicy,
}

/// A Web API client for one app.
pub struct WebApi {
    http: reqwest::Client,
    settings: ClientSettings,
    base: reqwest::Url,
    host: String,
    retrier: Retrier,
}

impl std::fmt::Debug for WebApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebApi")
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

/// `Retry-After` in ms: whole seconds as Slack sends them (a date or garbage gives none).
fn retry_after_ms(headers: &reqwest::header::HeaderMap) -> Option<u64> {
    let seconds: u64 = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(seconds.saturating_mul(1_000))
}

impl WebApi {
    /// A client for `settings`; `jitter` spreads retries (fixed in tests).
    pub fn new(settings: ClientSettings, jitter: Box<dyn Jitter>) -> Result<WebApi, String> {
        let scrub = |text: &str| settings.app_token.scrub(&settings.bot_token.scrub(text));
        // A trailing slash is added so `join` keeps the `/api` path.
        let base = reqwest::Url::parse(&format!(
            "{}/",
            settings.base_url.trim().trim_end_matches('/')
        ))
        .map_err(|error| {
            format!(
                "Slack baseUrl {:?} is not a URL: {error}",
                scrub(&settings.base_url)
            )
        })?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(format!(
                "Slack baseUrl must start with https:// (or http:// for a local test server), not {}://",
                base.scheme()
            ));
        }
        Ok(WebApi {
            // Downloads follow redirects by hand, checking each host (module docs).
            http: http_client("Slack", &base, USER_AGENT).map_err(|error| error.to_string())?,
            host: scrub(&origin(&base)),
            base,
            retrier: Retrier::new(settings.policy, jitter),
            settings,
        })
    }

    /// Retries made so far (for `diagnose`).
    pub fn retries(&self) -> u64 {
        self.retrier.retries()
    }

    /// `text` without either token.
    pub fn scrub(&self, text: &str) -> String {
        self.settings
            .app_token
            .scrub(&self.settings.bot_token.scrub(text))
    }

    /// Where the API is, as error messages may show it.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// `auth.test` with the bot token: who the bot is.
    pub async fn auth_test(&self) -> Result<AuthTest, ApiError> {
        let auth: AuthTest = self
            .call(
                "auth.test",
                Credential::Bot,
                &serde_json::json!({}),
                Retry::All,
            )
            .await?;
        if auth.user_id.is_empty() {
            return Err(ApiError::Malformed {
                method: "auth.test",
                status: 200,
                detail: "no user_id in the answer: the token is not a bot token".to_owned(),
            });
        }
        Ok(auth)
    }

    /// `apps.connections.open` with the app-level token: a fresh single-use WebSocket URL.
    /// One attempt: the socket's reconnect loop owns the backoff.
    pub async fn connections_open(&self) -> Result<String, ApiError> {
        let open: ConnectionsOpen = self
            .call(
                "apps.connections.open",
                Credential::App,
                &serde_json::json!({}),
                Retry::Never,
            )
            .await?;
        if open.url.is_empty() {
            return Err(ApiError::Malformed {
                method: "apps.connections.open",
                status: 200,
                detail: "no url in the answer".to_owned(),
            });
        }
        Ok(open.url)
    }

    /// `chat.postMessage` (into `thread_ts` when given).
    pub async fn post_message(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        text: &str,
        blocks: &[serde_json::Value],
    ) -> Result<Posted, ApiError> {
        let params = PostMessage {
            channel,
            text,
            thread_ts,
            mrkdwn: true,
            unfurl_links: false,
            unfurl_media: false,
            blocks,
        };
        self.call(
            "chat.postMessage",
            Credential::Bot,
            &params,
            Retry::Transient,
        )
        .await
    }

    /// Shares one file in `channel` (in `thread_ts` when given) the way Slack's external
    /// upload works: `files.getUploadURLExternal` (form-encoded `filename` and `length`)
    /// gives an upload URL and a file id; the bytes go to that URL as a multipart form
    /// (field `filename`), without the bot token, since the URL itself is the permission;
    /// `files.completeUploadExternal` then shares the file with `initial_comment`. Returns
    /// the file id. Needs the `files:write` scope.
    pub async fn upload_file(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        upload: &Upload<'_>,
    ) -> Result<String, ApiError> {
        const GET_URL: &str = "files.getUploadURLExternal";
        const SEND: &str = "file upload";
        let length = upload.data.len().to_string();
        let fields = [("filename", upload.name), ("length", length.as_str())];
        let fields = &fields;
        let ticket: UploadTicket = self
            .retrier
            .call(Retry::Transient, || self.attempt_form(GET_URL, fields))
            .await?;
        let target = reqwest::Url::parse(&ticket.upload_url).map_err(|_| ApiError::Malformed {
            method: GET_URL,
            status: 200,
            detail: "the upload_url is not a URL".to_owned(),
        })?;
        let timeout = self.settings.download_timeout;
        self.retrier
            .call(Retry::Transient, || async {
                let part = reqwest::multipart::Part::bytes(upload.data.to_vec())
                    .file_name(upload.name.to_owned())
                    .mime_str(upload.media_type)
                    .map_err(|error| ApiError::Malformed {
                        method: SEND,
                        status: 0,
                        detail: format!(
                            "the media type {:?} is not one ({error})",
                            upload.media_type
                        ),
                    })?;
                let response = self
                    .http
                    .post(target.clone())
                    .multipart(reqwest::multipart::Form::new().part("filename", part))
                    .timeout(timeout)
                    .send()
                    .await
                    .map_err(|error| self.transport_error(SEND, timeout, error))?;
                let status = response.status().as_u16();
                match status {
                    200..=299 => Ok(()),
                    500..=599 => Err(ApiError::Server {
                        method: SEND,
                        status,
                    }),
                    _ => Err(ApiError::Malformed {
                        method: SEND,
                        status,
                        detail: "Slack's upload service refused the file".to_owned(),
                    }),
                }
            })
            .await?;
        let title = upload.name;
        let complete = CompleteUpload {
            files: vec![CompleteFile {
                id: &ticket.file_id,
                title,
            }],
            channel_id: channel,
            thread_ts,
            initial_comment: (!upload.caption.is_empty()).then_some(upload.caption),
        };
        let _: serde_json::Value = self
            .call(
                "files.completeUploadExternal",
                Credential::Bot,
                &complete,
                Retry::Transient,
            )
            .await?;
        Ok(ticket.file_id)
    }

    /// One form-encoded call (`files.getUploadURLExternal` takes its arguments so).
    async fn attempt_form<T: DeserializeOwned>(
        &self,
        method: &'static str,
        fields: &[(&str, &str)],
    ) -> Result<T, ApiError> {
        let timeout = self.settings.request_timeout;
        let url = self.base.join(method).map_err(|_| ApiError::Malformed {
            method,
            status: 0,
            detail: "the method name does not make a URL".to_owned(),
        })?;
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        let response = self
            .http
            .post(url)
            .bearer_auth(self.settings.bot_token.expose())
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(body)
            .timeout(timeout)
            .send()
            .await
            .map_err(|error| self.transport_error(method, timeout, error))?;
        let status = response.status().as_u16();
        let retry_after = retry_after_ms(response.headers());
        let body = response
            .bytes()
            .await
            .map_err(|error| self.transport_error(method, timeout, error))?;
        self.read_answer(method, Credential::Bot, status, retry_after, &body)
    }

    /// `chat.update`; `blocks` replace the message's blocks (empty removes its buttons).
    pub async fn update_message(
        &self,
        channel: &str,
        ts: &str,
        text: &str,
        blocks: &[serde_json::Value],
    ) -> Result<Posted, ApiError> {
        let params = UpdateMessage {
            channel,
            ts,
            text,
            blocks,
        };
        self.call("chat.update", Credential::Bot, &params, Retry::Transient)
            .await
    }

    /// `chat.postEphemeral`: `text` shown to `user` alone, in `channel` (and thread).
    /// One attempt: it answers a click, and a late answer helps nobody.
    pub async fn post_ephemeral(
        &self,
        channel: &str,
        user: &str,
        thread_ts: Option<&str>,
        text: &str,
    ) -> Result<(), ApiError> {
        let params = PostEphemeral {
            channel,
            user,
            text,
            thread_ts,
        };
        let _: serde_json::Value = self
            .call("chat.postEphemeral", Credential::Bot, &params, Retry::Never)
            .await?;
        Ok(())
    }

    /// `reactions.add` (`add`) or `reactions.remove` of the bot's reaction `name`. One
    /// attempt: a reaction is a courtesy, and a late one is worth nothing. A reaction that
    /// is already there (or already gone) is what was asked for, not a failure.
    pub async fn own_reaction(
        &self,
        add: bool,
        channel: &str,
        timestamp: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        let (method, already) = if add {
            ("reactions.add", "already_reacted")
        } else {
            ("reactions.remove", "no_reaction")
        };
        let params = ReactionOnMessage {
            channel,
            timestamp,
            name,
        };
        match self
            .call::<_, serde_json::Value>(method, Credential::Bot, &params, Retry::Never)
            .await
        {
            Err(ApiError::Refused { code, .. }) if code == already => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// Whether the bot token may be sent to `url`: Slack's own hosts over https, or the
    /// configured Web API's origin (a local test server).
    pub fn is_slack_host(&self, url: &reqwest::Url) -> bool {
        let same_origin = url.scheme() == self.base.scheme()
            && url.host_str() == self.base.host_str()
            && url.port_or_known_default() == self.base.port_or_known_default();
        if same_origin {
            return true;
        }
        let Some(host) = url.host_str() else {
            return false;
        };
        let host = host.to_ascii_lowercase();
        url.scheme() == "https"
            && ["slack.com", "slack-gov.com"]
                .iter()
                .any(|domain| host == *domain || host.ends_with(&format!(".{domain}")))
    }

    /// Downloads a file's `url_private_download` with the bot token, refusing more than
    /// `limit` bytes: the declared `Content-Length` first, then the bytes actually received
    /// (I19). Redirects are followed only within Slack. Returns the `Content-Type` header
    /// and the bytes.
    pub async fn download(
        &self,
        reference: &str,
        limit: u64,
    ) -> Result<(Option<String>, Vec<u8>), DownloadError> {
        const METHOD: &str = "file download";
        let mut url =
            reqwest::Url::parse(reference.trim()).map_err(|_| DownloadError::NotSlack {
                host: "not a URL".to_owned(),
            })?;
        if !self.is_slack_host(&url) {
            return Err(DownloadError::NotSlack { host: origin(&url) });
        }
        let timeout = self.settings.download_timeout;
        let mut hops = 0;
        let response = loop {
            let response = self
                .http
                .get(url.clone())
                .bearer_auth(self.settings.bot_token.expose())
                .timeout(timeout)
                .send()
                .await
                .map_err(|error| self.transport_error(METHOD, timeout, error))?;
            if !response.status().is_redirection() {
                break response;
            }
            hops += 1;
            if hops > MAX_REDIRECTS {
                return Err(DownloadError::TooManyRedirects);
            }
            let next = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|value| value.to_str().ok())
                .and_then(|location| url.join(location).ok())
                .ok_or(DownloadError::Status {
                    status: response.status().as_u16(),
                })?;
            if !self.is_slack_host(&next) {
                return Err(DownloadError::RedirectOffSlack {
                    host: origin(&next),
                });
            }
            url = next;
        };
        let Downloaded { content_type, data } =
            read_capped(response, limit)
                .await
                .map_err(|failure| match failure {
                    DownloadFailure::Status(status) => DownloadError::Status { status },
                    DownloadFailure::TooLarge(over) => DownloadError::TooLarge(over),
                    DownloadFailure::Read(error) => {
                        self.transport_error(METHOD, timeout, error).into()
                    }
                })?;
        Ok((content_type, data))
    }

    fn transport_error(
        &self,
        method: &'static str,
        timeout: Duration,
        error: reqwest::Error,
    ) -> ApiError {
        if error.is_timeout() {
            return ApiError::Timeout {
                method,
                seconds: timeout.as_secs().max(1),
            };
        }
        ApiError::Network {
            method,
            host: self.host.clone(),
            detail: self.scrub(&describe(error)),
        }
    }

    /// One method call with `retry`'s retries under the shared policy.
    async fn call<P: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: &'static str,
        credential: Credential,
        params: &P,
        retry: Retry,
    ) -> Result<T, ApiError> {
        self.retrier
            .call(retry, || self.attempt(method, credential, params))
            .await
    }

    async fn attempt<P: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: &'static str,
        credential: Credential,
        params: &P,
    ) -> Result<T, ApiError> {
        let timeout = self.settings.request_timeout;
        let url = self.base.join(method).map_err(|_| ApiError::Malformed {
            method,
            status: 0,
            detail: "the method name does not make a URL".to_owned(),
        })?;
        let token = match credential {
            Credential::Bot => &self.settings.bot_token,
            Credential::App => &self.settings.app_token,
        };
        let response = self
            .http
            .post(url)
            .bearer_auth(token.expose())
            .json(params)
            .timeout(timeout)
            .send()
            .await
            .map_err(|error| self.transport_error(method, timeout, error))?;
        let status = response.status().as_u16();
        let retry_after = retry_after_ms(response.headers());
        let body = response
            .bytes()
            .await
            .map_err(|error| self.transport_error(method, timeout, error))?;
        self.read_answer(method, credential, status, retry_after, &body)
    }

    /// Reads a Web API answer: the value when `ok`, otherwise the error it stands for.
    pub(crate) fn read_answer<T: DeserializeOwned>(
        &self,
        method: &'static str,
        credential: Credential,
        status: u16,
        retry_after_ms: Option<u64>,
        body: &[u8],
    ) -> Result<T, ApiError> {
        if status == 429 {
            return Err(ApiError::RateLimited {
                method,
                retry_after_ms: retry_after_ms.unwrap_or(1_000),
            });
        }
        if status >= 500 {
            return Err(ApiError::Server { method, status });
        }
        let parsed: Result<serde_json::Value, _> = serde_json::from_slice(body);
        let (value, answer) = match parsed
            .ok()
            .and_then(|value| Some((ApiAnswer::deserialize_from(&value)?, value)))
        {
            Some((answer, value)) if (200..300).contains(&status) => (value, answer),
            _ => {
                return Err(ApiError::Malformed {
                    method,
                    status,
                    detail: if (200..300).contains(&status) {
                        "the body is not a JSON object with \"ok\"".to_owned()
                    } else {
                        "an unexpected HTTP status".to_owned()
                    },
                });
            }
        };
        if answer.ok {
            return serde_json::from_value(value).map_err(|error| ApiError::Malformed {
                method,
                status,
                detail: self.scrub(&format!("the answer has an unexpected shape ({error})")),
            });
        }
        let code = self.scrub(answer.error.as_deref().unwrap_or("unknown_error"));
        let (kind, env, place, expected) = match credential {
            Credential::Bot => (
                "bot token",
                self.settings.bot_token_env.clone(),
                "OAuth & Permissions, Bot User OAuth Token",
                "the bot token (xoxb-...)",
            ),
            Credential::App => (
                "app-level token",
                self.settings.app_token_env.clone(),
                "Basic Information, App-Level Tokens, with the connections:write scope",
                "an app-level token (xapp-...) with the connections:write scope",
            ),
        };
        Err(match code.as_str() {
            "ratelimited" => ApiError::RateLimited {
                method,
                retry_after_ms: retry_after_ms.unwrap_or(1_000),
            },
            "missing_scope" => ApiError::MissingScope {
                method,
                needed: self.scrub(answer.needed.as_deref().unwrap_or("(not named)")),
            },
            "not_allowed_token_type" => ApiError::WrongTokenType {
                method,
                env,
                expected,
            },
            auth if AUTH_CODES.contains(&auth) => ApiError::Unauthorized {
                kind,
                env,
                code,
                place,
            },
            _ => ApiError::Refused {
                method,
                hint: hint(&code).to_owned(),
                code,
            },
        })
    }
}

impl ApiAnswer {
    /// The answer's `ok`/`error` fields, when `value` is a JSON object with `ok`.
    fn deserialize_from(value: &serde_json::Value) -> Option<ApiAnswer> {
        value.get("ok")?.as_bool()?;
        serde_json::from_value(value.clone()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transport_core::jitter::FixedJitter;

    const BOT: &str = "xoxb-1111-2222-SECRETbot";
    const APP: &str = "xapp-1-A1-3333-SECRETapp";

    fn api(base: &str) -> WebApi {
        WebApi::new(
            ClientSettings {
                base_url: base.to_owned(),
                bot_token: Secret::new(BOT),
                bot_token_env: "PI_SLACK_BOT_TOKEN".to_owned(),
                app_token: Secret::new(APP),
                app_token_env: "PI_SLACK_APP_TOKEN".to_owned(),
                request_timeout: Duration::from_secs(1),
                download_timeout: Duration::from_secs(1),
                policy: RetryPolicy::REQUEST,
            },
            Box::new(FixedJitter(0.0)),
        )
        .expect("client")
    }

    fn error(status: u16, retry_after: Option<u64>, body: &str) -> ApiError {
        api("http://127.0.0.1:9/api")
            .read_answer::<serde_json::Value>(
                "chat.postMessage",
                Credential::Bot,
                status,
                retry_after,
                body.as_bytes(),
            )
            .expect_err("an error")
    }

    #[test]
    fn ok_false_is_an_error_even_with_http_200() {
        let refused = error(200, None, r#"{"ok":false,"error":"channel_not_found"}"#);
        assert_eq!(refused.code(), Some("channel_not_found"));
        assert_eq!(refused.outcome(), Outcome::Fatal);
        assert!(refused.to_string().contains("/invite"), "{refused}");
        assert_eq!(
            error(200, None, r#"{"ok":false,"error":"internal_error"}"#).outcome(),
            Outcome::Transient
        );
        assert_eq!(
            error(
                200,
                None,
                r#"{"ok":false,"error":"missing_scope","needed":"chat:write","provided":"x"}"#
            ),
            ApiError::MissingScope {
                method: "chat.postMessage",
                needed: "chat:write".to_owned()
            }
        );
        let auth = error(200, None, r#"{"ok":false,"error":"invalid_auth"}"#).to_string();
        assert!(auth.contains("$PI_SLACK_BOT_TOKEN"), "{auth}");
        assert!(!auth.contains(BOT), "{auth}");
    }

    #[test]
    fn a_429_waits_as_retry_after_says() {
        assert_eq!(
            error(429, Some(7_000), r#"{"ok":false,"error":"ratelimited"}"#),
            ApiError::RateLimited {
                method: "chat.postMessage",
                retry_after_ms: 7_000
            }
        );
        assert_eq!(
            error(429, None, "").outcome(),
            Outcome::RateLimited {
                retry_after_ms: 1_000
            }
        );
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(reqwest::header::RETRY_AFTER, "30".parse().expect("value"));
        assert_eq!(retry_after_ms(&headers), Some(30_000));
        headers.insert(
            reqwest::header::RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().expect("value"),
        );
        assert_eq!(retry_after_ms(&headers), None);
    }

    #[test]
    fn server_failures_and_foreign_answers_are_classified() {
        assert_eq!(error(502, None, "<html>").outcome(), Outcome::Transient);
        assert!(matches!(
            error(200, None, "<html>login</html>"),
            ApiError::Malformed { .. }
        ));
        assert!(matches!(
            error(404, None, r#"{"ok":false,"error":"unknown_method"}"#),
            ApiError::Malformed { status: 404, .. }
        ));
    }

    #[test]
    fn an_echoed_token_is_scrubbed_and_debug_hides_tokens() {
        let text = error(200, None, &format!(r#"{{"ok":false,"error":"odd {BOT}"}}"#)).to_string();
        assert!(!text.contains(BOT), "{text}");
        assert!(has_shape(&Secret::new(BOT), "xoxb-"));
        for bad in ["", "xoxb-", "xapp-1", "xoxb-a b", "xoxb-\u{e9}"] {
            assert!(!has_shape(&Secret::new(bad), "xoxb-"), "{bad:?}");
        }
    }

    #[test]
    fn the_token_goes_only_to_slack_hosts_or_the_configured_origin() {
        let api = api("http://127.0.0.1:9/api");
        let allowed = [
            "https://files.slack.com/files-pri/T1-F1/download/a.png",
            "https://slack.com/x",
            "https://files.slack-gov.com/x",
            "http://127.0.0.1:9/files/a.png",
        ];
        for url in allowed {
            assert!(api.is_slack_host(&url.parse().expect("url")), "{url}");
        }
        let refused = [
            "http://files.slack.com/x",
            "https://slack.com.evil.example/x",
            "https://evilslack.com/x",
            "http://127.0.0.1:10/x",
            "https://example.com/x",
        ];
        for url in refused {
            assert!(!api.is_slack_host(&url.parse().expect("url")), "{url}");
        }
    }

    #[tokio::test]
    async fn a_refused_connection_is_described_without_a_token() {
        let error = api("http://127.0.0.1:9/api")
            .auth_test()
            .await
            .expect_err("nothing listens on port 9");
        let text = error.to_string();
        assert!(matches!(error, ApiError::Network { .. }), "{text}");
        assert!(!text.contains(BOT) && !text.contains(APP), "{text}");
    }
}
