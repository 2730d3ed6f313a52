//! Discord REST v10 over HTTP: one function per call, each with its own timeout, retry
//! rule (I32) and rate-limit bucket ([`crate::ratelimit`]), and errors a person can act on
//! that never contain the token.
//!
//! The token travels only in the `Authorization: Bot …` header (and in the gateway's
//! IDENTIFY/RESUME, see [`crate::gateway`]); reqwest errors never print headers, and every
//! text that came from the server is still scrubbed of the token before it is kept.
//! Redirects are not followed: a redirect would take the header wherever `Location`
//! points. Attachment downloads go to the CDN without the header at all.

use std::sync::Mutex;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use transport_core::Secret;
use transport_core::capped::OverCap;
use transport_core::download::{DownloadFailure, Downloaded, read_capped};
use transport_core::http::{Failure, Retrier};
use transport_core::http_client::{describe, http_client, origin};
use transport_core::jitter::Jitter;
use transport_core::retry::{Outcome, RetryPolicy};
use transport_core::sync::lock;

use crate::ratelimit::{Headers, RateLimits, Route, WaitStats, seconds};
use crate::wire::{
    ActionRow, CallbackData, CreateMessage, EPHEMERAL, EditMessage, ErrorBody, GatewayBot,
    InteractionCallback, ModifyThread, NO_PINGS, PING_REPLIED_USER_ONLY, ReplyReference,
    SentMessage, StartThread, ThreadChannel, User,
};

/// Hosts Discord serves attachments from. An attachment reference on any other host is
/// refused: the reference comes from the bridge, and fetching whatever URL it names would
/// let a payload make this host request internal addresses.
pub const CDN_HOSTS: &[&str] = &["cdn.discordapp.com", "media.discordapp.net"];

/// The bot token from what the operator exported: trimmed, and a pasted `Bot ` prefix
/// dropped (the header adds its own, and `Bot Bot …` would be refused).
pub fn bot_token(raw: &str) -> Secret {
    let raw = raw.trim();
    Secret::new(raw.strip_prefix("Bot ").unwrap_or(raw))
}

/// Whether `token` can be a bot token: three base64url parts joined by dots. Anything
/// with spaces, control characters or other symbols would break the header or is not a
/// token.
pub fn looks_like_bot_token(token: &Secret) -> bool {
    let parts: Vec<&str> = token.expose().split('.').collect();
    parts.len() == 3
        && parts.iter().all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        })
}

/// Why a REST call failed, written for the person who has to fix it. No variant holds
/// the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 401: the token was reset or mistyped.
    #[error(
        "Discord refused the bot token in ${env} (HTTP 401 Unauthorized): it was reset in the Developer Portal or mistyped. Copy a new one (Developer Portal → your application → Bot → Reset Token), export it as {env} again and restart"
    )]
    Unauthorized {
        /// Name of the environment variable the token came from.
        env: String,
    },
    /// 403: a permission is missing.
    #[error(
        "Discord refused {call} (HTTP 403, code {code}: {message}): the bot lacks a permission in this channel. Give its role View Channel, Send Messages, Send Messages in Threads and Read Message History there"
    )]
    Forbidden {
        /// What was called.
        call: &'static str,
        /// Discord's JSON error code.
        code: i64,
        /// Discord's message.
        message: String,
    },
    /// 404: the channel or message does not exist, the bot cannot see it, or the base URL
    /// is not the Discord API.
    #[error("Discord {call}: {message} (HTTP 404, code {code}); {hint}")]
    NotFound {
        /// What was called.
        call: &'static str,
        /// Discord's JSON error code (10003 unknown channel, 10008 unknown message).
        code: i64,
        /// Discord's message.
        message: String,
        /// What it most likely means.
        hint: String,
    },
    /// 429: a bucket or the global limit is empty.
    #[error("Discord {call} was rate limited; Discord asks to wait {retry_after_ms} ms")]
    RateLimited {
        /// What was called.
        call: &'static str,
        /// How long to wait (Discord's float seconds, rounded up).
        retry_after_ms: u64,
        /// The global limit, not the route's bucket.
        global: bool,
    },
    /// Any other 4xx: the request itself was refused; retrying cannot help.
    #[error("Discord refused {call}: {message} (HTTP {status}, code {code})")]
    Rejected {
        /// What was called.
        call: &'static str,
        /// HTTP status.
        status: u16,
        /// Discord's JSON error code.
        code: i64,
        /// Discord's message.
        message: String,
    },
    /// 5xx: Discord's side failed; retried with backoff.
    #[error("Discord {call} failed on Discord's side (HTTP {status})")]
    Server {
        /// What was called.
        call: &'static str,
        /// HTTP status.
        status: u16,
    },
    /// No answer in time.
    #[error("Discord {call} got no answer within {seconds} s")]
    Timeout {
        /// What was called.
        call: &'static str,
        /// The timeout that passed.
        seconds: u64,
    },
    /// The connection failed or dropped.
    #[error("Discord {call} could not reach {host}: {detail}")]
    Network {
        /// What was called.
        call: &'static str,
        /// Scheme, host and port of the API, never a path.
        host: String,
        /// What the network stack said, without a URL.
        detail: String,
    },
    /// The answer was not what the API documents (a proxy's page, a truncated body).
    #[error("Discord {call} answered with something unexpected (HTTP {status}): {detail}")]
    Malformed {
        /// What was called.
        call: &'static str,
        /// HTTP status.
        status: u16,
        /// What was wrong with it.
        detail: String,
    },
}

impl Failure for ApiError {
    fn outcome(&self) -> Outcome {
        match self {
            ApiError::RateLimited { retry_after_ms, .. } => Outcome::RateLimited {
                retry_after_ms: *retry_after_ms,
            },
            ApiError::Server { .. } | ApiError::Timeout { .. } | ApiError::Network { .. } => {
                Outcome::Transient
            }
            ApiError::Malformed { status, .. } if *status >= 500 => Outcome::Transient,
            _ => Outcome::Fatal,
        }
    }
}

/// Why an attachment could not be fetched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DownloadError {
    /// The reference is not a Discord CDN URL.
    #[error(
        "{reference:?} is not a Discord attachment URL (https on cdn.discordapp.com or media.discordapp.net); it was not fetched"
    )]
    NotCdn {
        /// The reference, without its query (the signature).
        reference: String,
    },
    /// The size the CDN declared, or the bytes received, are over the caller's limit.
    #[error(transparent)]
    TooLarge(#[from] OverCap),
    /// The CDN answered with an error status.
    #[error(
        "the Discord CDN answered HTTP {status} for this attachment (attachment links are signed and expire after about a day; sending the file again helps)"
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

/// A file for [`RestApi::upload_file`].
#[derive(Debug, Clone, Copy)]
pub struct Upload<'a> {
    /// File name as the channel shows it.
    pub name: &'a str,
    /// Media type.
    pub media_type: &'a str,
    /// Plain text posted with it; empty for none.
    pub caption: &'a str,
    /// The bytes.
    pub data: &'a [u8],
}

impl Upload<'_> {
    fn form(&self) -> Result<reqwest::multipart::Form, String> {
        let payload = serde_json::json!({
            "content": self.caption,
            "allowed_mentions": NO_PINGS,
            "attachments": [{"id": 0, "filename": self.name}],
        });
        let part = reqwest::multipart::Part::bytes(self.data.to_vec())
            .file_name(self.name.to_owned())
            .mime_str(self.media_type)
            .map_err(|error| {
                format!("the media type {:?} is not one ({error})", self.media_type)
            })?;
        Ok(reqwest::multipart::Form::new()
            .text("payload_json", payload.to_string())
            .part("files[0]", part))
    }
}

/// How the client is set up.
#[derive(Debug, Clone)]
pub struct ClientSettings {
    /// Base URL including the version (`https://discord.com/api/v10`).
    pub base_url: String,
    /// The token.
    pub token: Secret,
    /// Name of the environment variable the token came from, for error messages.
    pub token_env: String,
    /// Timeout of an ordinary request.
    pub request_timeout: Duration,
    /// Timeout of an attachment download.
    pub download_timeout: Duration,
    /// Retries within one call.
    pub policy: RetryPolicy,
}

/// A REST client for one bot.
pub struct RestApi {
    http: reqwest::Client,
    settings: ClientSettings,
    base: reqwest::Url,
    host: String,
    limits: Mutex<RateLimits>,
    retrier: Retrier,
}

impl std::fmt::Debug for RestApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestApi")
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

/// Discord requires this shape of `User-Agent`, or Cloudflare may block the bot
/// (docs/protocols.md#discord-rest).
const USER_AGENT: &str = concat!(
    "DiscordBot (https://github.com/pi-bot-connect/bot-connect, ",
    env!("CARGO_PKG_VERSION"),
    ")"
);

/// "now" for the rate limiter: tokio's clock, so tests with paused time move it.
fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

/// Milliseconds for a wait, rounded up (a 0.2 ms wait is still a wait).
fn ceil_ms(wait: Duration) -> u64 {
    let ms = wait.as_nanos().div_ceil(1_000_000);
    u64::try_from(ms).unwrap_or(u64::MAX)
}

impl RestApi {
    /// A client for `settings`; `jitter` spreads retries (fixed in tests).
    pub fn new(settings: ClientSettings, jitter: Box<dyn Jitter>) -> Result<RestApi, String> {
        let trimmed = settings.base_url.trim_end_matches('/').to_owned();
        let base = reqwest::Url::parse(&trimmed).map_err(|error| {
            format!(
                "Discord baseUrl {:?} is not a URL: {error}",
                settings.token.scrub(&trimmed)
            )
        })?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(format!(
                "Discord baseUrl must start with https:// (or http:// for a local test server), not {:?}",
                settings.token.scrub(&trimmed)
            ));
        }
        Ok(RestApi {
            http: http_client("Discord", &base, USER_AGENT).map_err(|error| error.to_string())?,
            host: settings.token.scrub(&origin(&base)),
            base,
            retrier: Retrier::new(settings.policy, jitter),
            settings: ClientSettings {
                base_url: trimmed,
                ..settings
            },
            limits: Mutex::new(RateLimits::new()),
        })
    }

    /// Retries made so far.
    pub fn retries(&self) -> u64 {
        self.retrier.retries()
    }

    /// Bucket waits and 429s so far.
    pub fn wait_stats(&self) -> WaitStats {
        lock(&self.limits).stats()
    }

    /// The token, for scrubbing texts built elsewhere.
    pub fn token(&self) -> &Secret {
        &self.settings.token
    }

    /// Where the API is, as messages may show it.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// `base_url` + the path segments, each percent-encoded (a conversation id is bridge
    /// input and must not change the path: `a/b` stays one segment).
    fn url(&self, segments: &[&str]) -> reqwest::Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    /// `GET /users/@me`: who the bot is. Checks the token.
    pub async fn get_me(&self) -> Result<User, ApiError> {
        self.call(
            "GET /users/@me",
            Method::GET,
            Route::me(),
            &["users", "@me"],
            None::<&()>,
            Retry::All,
        )
        .await
    }

    /// `GET /gateway/bot`: the gateway URL and the session start limit.
    pub async fn gateway_bot(&self) -> Result<GatewayBot, ApiError> {
        self.call(
            "GET /gateway/bot",
            Method::GET,
            Route::gateway_bot(),
            &["gateway", "bot"],
            None::<&()>,
            Retry::All,
        )
        .await
    }

    /// `POST /channels/{id}/messages` with no pings and `components` (buttons) under it:
    /// the new message's id.
    /// As a reply to message `reply_to` when given (pinging its author only).
    pub async fn create_message(
        &self,
        channel: &str,
        content: &str,
        components: &[ActionRow],
        reply_to: Option<&str>,
    ) -> Result<String, ApiError> {
        let body = CreateMessage {
            content,
            allowed_mentions: if reply_to.is_some() {
                PING_REPLIED_USER_ONLY
            } else {
                NO_PINGS
            },
            components,
            message_reference: reply_to.map(|message_id| ReplyReference {
                message_id,
                fail_if_not_exists: false,
            }),
        };
        let sent: SentMessage = self
            .call(
                "create message",
                Method::POST,
                Route::create_message(channel),
                &["channels", channel, "messages"],
                Some(&body),
                Retry::Transient,
            )
            .await?;
        Ok(sent.id)
    }

    /// `POST /channels/{id}/messages` as `multipart/form-data`: `payload_json` (the
    /// caption as `content`, no pings, `attachments: [{id: 0, filename}]`) and the file as
    /// `files[0]`, as Discord's "Uploading Files" describes. The new message's id.
    pub async fn upload_file(
        &self,
        channel: &str,
        upload: &Upload<'_>,
    ) -> Result<String, ApiError> {
        let call = "upload file";
        let route = &Route::create_message(channel);
        let segments: &[&str] = &["channels", channel, "messages"];
        let retry = Retry::Transient;
        let sent: SentMessage = self
            .retrier
            .call(retry, move || async move {
                self.wait_for_bucket(call, route, retry).await?;
                self.attempt(
                    call,
                    Method::POST,
                    route,
                    segments,
                    None::<&()>,
                    Some(upload),
                )
                .await
            })
            .await?;
        Ok(sent.id)
    }

    /// `PATCH /channels/{id}/messages/{id}` with no pings; `components` replace the
    /// message's buttons (empty removes them).
    pub async fn edit_message(
        &self,
        channel: &str,
        message: &str,
        content: &str,
        components: &[ActionRow],
    ) -> Result<(), ApiError> {
        let body = EditMessage {
            content,
            allowed_mentions: NO_PINGS,
            components,
        };
        let _: serde_json::Value = self
            .call(
                "edit message",
                Method::PATCH,
                Route::edit_message(channel),
                &["channels", channel, "messages", message],
                Some(&body),
                Retry::Transient,
            )
            .await?;
        Ok(())
    }

    /// `POST /interactions/{id}/{token}/callback`: acknowledges a component click. One
    /// attempt: Discord wants it within 3 seconds, and a retry after that is refused
    /// anyway (the click then shows "This interaction failed", nothing worse).
    pub async fn interaction_callback(
        &self,
        interaction: &str,
        token: &str,
        body: &InteractionCallback,
    ) -> Result<(), ApiError> {
        let _: serde_json::Value = self
            .call(
                "interaction callback",
                Method::POST,
                Route::interaction_callback(interaction),
                &["interactions", interaction, token, "callback"],
                Some(body),
                Retry::Never,
            )
            .await?;
        Ok(())
    }

    /// `POST /webhooks/{application_id}/{interaction_token}` with flags 64: an ephemeral
    /// follow-up to a click, shown to the clicker alone, no pings; the new message's id.
    pub async fn create_followup(
        &self,
        application: &str,
        interaction: &str,
        token: &str,
        content: &str,
    ) -> Result<String, ApiError> {
        let body = CallbackData {
            content: content.to_owned(),
            flags: EPHEMERAL,
            allowed_mentions: NO_PINGS,
        };
        let sent: SentMessage = self
            .call(
                "follow-up message",
                Method::POST,
                Route::followup(interaction),
                &["webhooks", application, token],
                Some(&body),
                Retry::Transient,
            )
            .await?;
        Ok(sent.id)
    }

    /// `PUT` (`add`) or `DELETE` the bot's own reaction `emoji` on a message. One attempt:
    /// a reaction is a courtesy, and a late one is worth nothing.
    pub async fn own_reaction(
        &self,
        add: bool,
        channel: &str,
        message: &str,
        emoji: &str,
    ) -> Result<(), ApiError> {
        let (what, method) = if add {
            ("add reaction", Method::PUT)
        } else {
            ("remove reaction", Method::DELETE)
        };
        let _: serde_json::Value = self
            .call(
                what,
                method,
                Route::reaction(channel),
                &[
                    "channels",
                    channel,
                    "messages",
                    message,
                    "reactions",
                    emoji,
                    "@me",
                ],
                None::<&()>,
                Retry::Never,
            )
            .await?;
        Ok(())
    }

    /// `POST /channels/{id}/threads`: a public thread (type 11) called `name` in
    /// `channel`, without a starter message; the thread's id. One attempt: a retry after a
    /// lost answer would make a second thread of the same name.
    pub async fn start_thread(&self, channel: &str, name: &str) -> Result<String, ApiError> {
        let body = StartThread {
            name,
            kind: 11,
            auto_archive_duration: 10_080,
        };
        let made: ThreadChannel = self
            .call(
                "start thread",
                Method::POST,
                Route::start_thread(channel),
                &["channels", channel, "threads"],
                Some(&body),
                Retry::Never,
            )
            .await?;
        Ok(made.id)
    }

    /// `PATCH /channels/{thread}`: renames the thread and archives or unarchives it; may
    /// be repeated without harm.
    pub async fn modify_thread(
        &self,
        thread: &str,
        name: &str,
        archived: bool,
    ) -> Result<(), ApiError> {
        let _: serde_json::Value = self
            .call(
                "modify thread",
                Method::PATCH,
                Route::modify_channel(thread),
                &["channels", thread],
                Some(&ModifyThread { name, archived }),
                Retry::Transient,
            )
            .await?;
        Ok(())
    }

    /// `POST /channels/{id}/typing`: one attempt with a short timeout, since the hint is
    /// worthless late and must never hold anything up (I24).
    pub async fn trigger_typing(&self, channel: &str) -> Result<(), ApiError> {
        let _: serde_json::Value = self
            .call(
                "typing",
                Method::POST,
                Route::typing(channel),
                &["channels", channel, "typing"],
                None::<&()>,
                Retry::Never,
            )
            .await?;
        Ok(())
    }

    /// Whether `url` is somewhere attachments may be fetched from: a Discord CDN host over
    /// https, or the API's own origin (a loopback test server serving files).
    fn attachment_url(&self, reference: &str) -> Result<reqwest::Url, DownloadError> {
        let refused = || DownloadError::NotCdn {
            reference: reference
                .split(['?', '#'])
                .next()
                .unwrap_or_default()
                .to_owned(),
        };
        let url = reqwest::Url::parse(reference).map_err(|_| refused())?;
        let host = url.host_str().unwrap_or_default();
        let cdn =
            url.scheme() == "https" && CDN_HOSTS.iter().any(|cdn| host.eq_ignore_ascii_case(cdn));
        let same_origin = url.scheme() == self.base.scheme()
            && url.host_str() == self.base.host_str()
            && url.port_or_known_default() == self.base.port_or_known_default();
        if (cdn || same_origin) && url.username().is_empty() && url.password().is_none() {
            Ok(url)
        } else {
            Err(refused())
        }
    }

    /// Downloads an attachment, refusing more than `limit` bytes: the declared
    /// `Content-Length` first, then the bytes actually received (I19). No token is sent:
    /// CDN URLs are signed. Returns the `Content-Type` header and the bytes.
    pub async fn download(
        &self,
        reference: &str,
        limit: u64,
    ) -> Result<(Option<String>, Vec<u8>), DownloadError> {
        const CALL: &str = "attachment download";
        let url = self.attachment_url(reference)?;
        let timeout = self.settings.download_timeout;
        let response = self
            .http
            .get(url)
            .timeout(timeout)
            .send()
            .await
            .map_err(|error| self.transport_error(CALL, timeout, error))?;
        let Downloaded { content_type, data } =
            read_capped(response, limit)
                .await
                .map_err(|failure| match failure {
                    DownloadFailure::Status(status) => DownloadError::Status { status },
                    DownloadFailure::TooLarge(over) => DownloadError::TooLarge(over),
                    DownloadFailure::Read(error) => {
                        self.transport_error(CALL, timeout, error).into()
                    }
                })?;
        Ok((content_type, data))
    }

    fn transport_error(
        &self,
        call: &'static str,
        timeout: Duration,
        error: reqwest::Error,
    ) -> ApiError {
        if error.is_timeout() {
            return ApiError::Timeout {
                call,
                seconds: timeout.as_secs().max(1),
            };
        }
        ApiError::Network {
            call,
            host: self.host.clone(),
            detail: self.settings.token.scrub(&describe(error)),
        }
    }

    /// Waits for the route's bucket and the global limit. With `Retry::Transient` a wait
    /// longer than the policy allows inside one call becomes a rate limit for the caller.
    async fn wait_for_bucket(
        &self,
        call: &'static str,
        route: &Route,
        retry: Retry,
    ) -> Result<(), ApiError> {
        loop {
            let wait = lock(&self.limits).acquire(route, now());
            if wait.is_zero() {
                return Ok(());
            }
            if retry == Retry::Transient && wait > self.settings.policy.max_platform_wait {
                return Err(ApiError::RateLimited {
                    call,
                    retry_after_ms: ceil_ms(wait),
                    global: false,
                });
            }
            lock(&self.limits).waited(wait);
            tokio::time::sleep(wait).await;
        }
    }

    /// One call with `retry`'s retries under the shared policy, each attempt after the
    /// route's bucket allows it. A 429's wait is already in the bucket when the loop
    /// sleeps; the bucket wait covers the rest.
    async fn call<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        call: &'static str,
        method: Method,
        route: Route,
        segments: &[&str],
        body: Option<&B>,
        retry: Retry,
    ) -> Result<T, ApiError> {
        let (method, route) = (&method, &route);
        self.retrier
            .call(retry, move || async move {
                self.wait_for_bucket(call, route, retry).await?;
                self.attempt(call, method.clone(), route, segments, body, None)
                    .await
            })
            .await
    }

    async fn attempt<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        call: &'static str,
        method: Method,
        route: &Route,
        segments: &[&str],
        body: Option<&B>,
        upload: Option<&Upload<'_>>,
    ) -> Result<T, ApiError> {
        // An upload of megabytes is timed like a download, not like a message.
        let timeout = if upload.is_some() {
            self.settings.download_timeout
        } else {
            self.settings.request_timeout
        };
        let mut request = self
            .http
            .request(method, self.url(segments))
            .header(
                reqwest::header::AUTHORIZATION,
                format!("Bot {}", self.settings.token.expose()),
            )
            .timeout(timeout);
        request = match (upload, body) {
            // A form is consumed by its send: each attempt builds its own.
            (Some(upload), _) => {
                request.multipart(upload.form().map_err(|detail| ApiError::Malformed {
                    call,
                    status: 0,
                    detail,
                })?)
            }
            (None, Some(body)) => request.json(body),
            // Discord wants a valid Content-Type even on an empty POST (50035 otherwise).
            (None, None) => request.header(reqwest::header::CONTENT_LENGTH, "0"),
        };
        let response = request
            .send()
            .await
            .map_err(|error| self.transport_error(call, timeout, error))?;
        let status = response.status();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned)
        };
        let headers = Headers::read(header);
        let retry_after_header = header("retry-after");
        let global_header = header("x-ratelimit-global");
        lock(&self.limits).observe(route, &headers, now());
        let bytes = response
            .bytes()
            .await
            .map_err(|error| self.transport_error(call, timeout, error))?;
        if status.is_success() {
            if bytes.is_empty() || status == StatusCode::NO_CONTENT {
                return serde_json::from_value(serde_json::Value::Null).map_err(|error| {
                    ApiError::Malformed {
                        call,
                        status: status.as_u16(),
                        detail: format!("an empty answer where a body was expected ({error})"),
                    }
                });
            }
            return serde_json::from_slice(&bytes).map_err(|error| ApiError::Malformed {
                call,
                status: status.as_u16(),
                detail: self
                    .settings
                    .token
                    .scrub(&format!("the body has an unexpected shape ({error})")),
            });
        }
        let error_body: ErrorBody = serde_json::from_slice(&bytes).unwrap_or_default();
        let error = self.read_error(
            call,
            status.as_u16(),
            error_body,
            retry_after_header.as_deref(),
            global_header.as_deref(),
            headers.reset_after,
        );
        if let ApiError::RateLimited {
            retry_after_ms,
            global,
            ..
        } = &error
        {
            lock(&self.limits).limited(
                route,
                Duration::from_millis(*retry_after_ms),
                *global,
                now(),
            );
        }
        Err(error)
    }

    /// The error an answer with a non-2xx `status` stands for.
    fn read_error(
        &self,
        call: &'static str,
        status: u16,
        body: ErrorBody,
        retry_after_header: Option<&str>,
        global_header: Option<&str>,
        reset_after: Option<Duration>,
    ) -> ApiError {
        let message = self.settings.token.scrub(if body.message.is_empty() {
            "no message given"
        } else {
            &body.message
        });
        match status {
            401 => ApiError::Unauthorized {
                env: self.settings.token_env.clone(),
            },
            403 => ApiError::Forbidden {
                call,
                code: body.code,
                message,
            },
            404 => ApiError::NotFound {
                call,
                code: body.code,
                message,
                hint: match body.code {
                    10003 => "the channel does not exist, or the bot is not in its server or cannot see it".to_owned(),
                    10008 => "the message was deleted".to_owned(),
                    _ => format!("baseUrl {} does not look like the Discord API v10", self.host),
                },
            },
            429 => {
                // The body's float seconds are exact; the header is whole seconds; the
                // bucket's reset is the last resort (docs/protocols.md#discord-rate-limits).
                let wait = body
                    .retry_after
                    .and_then(|after| Duration::try_from_secs_f64(after).ok())
                    .or_else(|| retry_after_header.and_then(seconds))
                    .or(reset_after)
                    .unwrap_or(Duration::from_secs(1));
                ApiError::RateLimited {
                    call,
                    retry_after_ms: ceil_ms(wait).max(1),
                    global: body.global == Some(true)
                        || global_header.is_some_and(|value| value.eq_ignore_ascii_case("true")),
                }
            }
            500..=599 => ApiError::Server { call, status },
            _ => ApiError::Rejected {
                call,
                status,
                code: body.code,
                message,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transport_core::jitter::FixedJitter;

    const TOKEN: &str = "MTIzNDU2Nzg5MDEyMzQ1Njc4.GabcDE.secret-part_XYZ";

    fn api() -> RestApi {
        RestApi::new(
            ClientSettings {
                base_url: "http://127.0.0.1:9/api/v10/".to_owned(),
                token: bot_token(TOKEN),
                token_env: "PI_DISCORD_TOKEN".to_owned(),
                request_timeout: Duration::from_secs(1),
                download_timeout: Duration::from_secs(1),
                policy: RetryPolicy::REQUEST,
            },
            Box::new(FixedJitter(0.0)),
        )
        .expect("client")
    }

    fn error(status: u16, body: &str, retry_after: Option<&str>) -> ApiError {
        api().read_error(
            "create message",
            status,
            serde_json::from_str(body).unwrap_or_default(),
            retry_after,
            None,
            None,
        )
    }

    #[test]
    fn a_429_keeps_discords_float_seconds() {
        assert_eq!(
            error(
                429,
                r#"{"message":"You are being rate limited.","retry_after":0.337,"global":false}"#,
                Some("1")
            ),
            ApiError::RateLimited {
                call: "create message",
                retry_after_ms: 337,
                global: false
            }
        );
        // No body: the whole-second header; nothing at all: one second.
        assert_eq!(
            error(429, "", Some("2")).outcome(),
            Outcome::RateLimited {
                retry_after_ms: 2_000
            }
        );
        assert_eq!(
            error(429, "", None).outcome(),
            Outcome::RateLimited {
                retry_after_ms: 1_000
            }
        );
        assert!(matches!(
            error(429, r#"{"retry_after":1.5,"global":true}"#, None),
            ApiError::RateLimited {
                global: true,
                retry_after_ms: 1_500,
                ..
            }
        ));
    }

    #[test]
    fn errors_say_what_to_fix_and_never_show_the_token() {
        let unauthorized = error(401, r#"{"message":"401: Unauthorized","code":0}"#, None);
        let text = unauthorized.to_string();
        assert!(
            text.contains("$PI_DISCORD_TOKEN") && text.contains("Reset Token"),
            "{text}"
        );
        let forbidden = error(
            403,
            r#"{"message":"Missing Permissions","code":50013}"#,
            None,
        );
        assert!(
            forbidden.to_string().contains("Send Messages"),
            "{forbidden}"
        );
        let echoed = error(
            400,
            &format!(r#"{{"message":"bad {TOKEN}","code":50035}}"#),
            None,
        );
        assert!(!echoed.to_string().contains(TOKEN), "{echoed}");
        assert_eq!(error(502, "<html>", None).outcome(), Outcome::Transient);
        assert_eq!(error(400, "{}", None).outcome(), Outcome::Fatal);
    }

    #[test]
    fn tokens_are_checked_for_shape_and_lose_a_pasted_prefix() {
        assert!(looks_like_bot_token(&bot_token(&format!(" Bot {TOKEN}\n"))));
        assert_eq!(bot_token(&format!("Bot {TOKEN}")).expose(), TOKEN);
        for bad in ["", "abc", "a.b", "a.b.c.d", "a .b.c", "a.b/.c", "a..c"] {
            assert!(!looks_like_bot_token(&bot_token(bad)), "{bad:?}");
        }
    }

    #[test]
    fn path_segments_are_encoded_so_bridge_input_cannot_change_the_route() {
        let api = api();
        assert_eq!(
            api.url(&["channels", "a/../b c", "typing"]).as_str(),
            "http://127.0.0.1:9/api/v10/channels/a%2F..%2Fb%20c/typing"
        );
    }

    #[test]
    fn attachments_come_only_from_the_cdn_or_the_apis_own_origin() {
        let api = api();
        for good in [
            "https://cdn.discordapp.com/attachments/1/2/a.png?ex=65&is=64&hm=ab",
            "https://media.discordapp.net/attachments/1/2/a.png",
            "http://127.0.0.1:9/attachments/1/2/a.png",
        ] {
            assert!(api.attachment_url(good).is_ok(), "{good}");
        }
        for bad in [
            "http://cdn.discordapp.com/attachments/1/2/a.png",
            "https://evil.example/a.png",
            "https://cdn.discordapp.com.evil.example/a.png",
            "http://127.0.0.1:10/a.png",
            "https://user:pw@cdn.discordapp.com/a.png",
            "file:///etc/passwd",
            "not a url",
        ] {
            let error = api.attachment_url(bad).expect_err(bad);
            assert!(!error.to_string().contains("ex="), "{error}");
        }
    }

    #[tokio::test]
    async fn a_refused_connection_is_described_without_the_url_or_token() {
        let error = api().get_me().await.expect_err("nothing listens on port 9");
        let text = error.to_string();
        assert!(matches!(error, ApiError::Network { .. }), "{text}");
        assert!(
            !text.contains(TOKEN) && !text.contains("/api/v10"),
            "{text}"
        );
        assert!(text.contains("http://127.0.0.1:9"), "{text}");
    }
}
