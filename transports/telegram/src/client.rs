//! The Bot API over HTTP: one method call per function, each with its own timeout and
//! retry rule (I32), and errors a person can act on that never contain the token.
//!
//! Why the care about the token: it is part of every request URL
//! (`/bot<token>/<method>`, `/file/bot<token>/<path>`), and `reqwest::Error` prints the URL
//! it failed on. Every reqwest error is stripped of its URL (`without_url`) before it is
//! described, every text that came from the server is scrubbed of the token as well (an
//! independent Bot API server might echo the path), and redirects are not followed (a
//! redirect would carry the token to wherever the `Location` points).

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
    AnswerCallbackQuery, ApiResponse, ChatId, CreateForumTopic, EditMessageText, File, ForumTopic,
    ForumTopicChange, GetFile, GetUpdates, InlineKeyboardMarkup, ReactionTypeEmoji,
    ReplyParameters, SendChatAction, SendMessage, SendMessageDraft, SentMessage,
    SetMessageReaction, User,
};

/// The update kinds the transport asks for. Edited messages are asked for only so they
/// can be ignored knowingly (and counted) instead of vanishing without a trace;
/// `callback_query` carries the presses on the approval request's buttons.
pub const ALLOWED_UPDATES: &[&str] = &["message", "edited_message", "callback_query"];

/// Whether `token` can be a bot token: `<bot id>:<secret>`. Anything with characters that
/// would change the request path (`/`, `?`, `#`, spaces) cannot be one and would only
/// produce confusing 404s.
pub fn looks_like_bot_token(token: &Secret) -> bool {
    let Some((id, secret)) = token.expose().split_once(':') else {
        return false;
    };
    !id.is_empty()
        && id.bytes().all(|b| b.is_ascii_digit())
        && !secret.is_empty()
        && secret
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Why a Bot API call failed, written for the person who has to fix it. No variant holds
/// the token (texts from the server are scrubbed before they are stored).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 401: the token was revoked, regenerated or mistyped.
    #[error(
        "Telegram refused the bot token in ${env} (HTTP 401 Unauthorized): it was revoked, regenerated in @BotFather or mistyped. Copy the current token from @BotFather (/mybots, then API Token), export it as {env} again and restart"
    )]
    Unauthorized {
        /// Name of the environment variable the token came from.
        env: String,
    },
    /// 404 for a method that exists: Telegram answers this to a malformed token, and any
    /// server that is not a Bot API server answers it too.
    #[error(
        "Telegram {method} answered HTTP 404 Not Found: the token in ${env} is not a bot token (it looks like 123456789:AAE...), or baseUrl {host} is not a Bot API server"
    )]
    NotFound {
        /// The method called.
        method: &'static str,
        /// Name of the environment variable the token came from.
        env: String,
        /// The base URL's host, never a path.
        host: String,
    },
    /// 409 from `getUpdates`: another program polls updates for the same bot.
    #[error(
        "Telegram {method}: another process is polling updates for this bot (HTTP 409 Conflict). Telegram allows one getUpdates consumer per bot token: stop the other bot-connect or bot program that uses this token, then restart this one"
    )]
    Conflict {
        /// The method called.
        method: &'static str,
    },
    /// 409 from `getUpdates` because a webhook is set.
    #[error(
        "Telegram {method}: this bot has a webhook set, and Telegram delivers no updates to polling while it is (HTTP 409 Conflict). Remove it by calling the Bot API method deleteWebhook once (open https://api.telegram.org/bot<token>/deleteWebhook with your token in place of <token>), then restart"
    )]
    WebhookActive {
        /// The method called.
        method: &'static str,
    },
    /// 429: flood control.
    #[error("Telegram {method} was rate limited; Telegram asks to wait {retry_after_ms} ms")]
    RateLimited {
        /// The method called.
        method: &'static str,
        /// `parameters.retry_after`, in ms.
        retry_after_ms: u64,
    },
    /// Any other 4xx: the request itself was refused; retrying cannot help.
    #[error("Telegram {method} was refused: {description} (HTTP {status})")]
    Rejected {
        /// The method called.
        method: &'static str,
        /// HTTP status.
        status: u16,
        /// Telegram's description, scrubbed of the token.
        description: String,
    },
    /// 5xx: Telegram's side failed; retried with backoff.
    #[error("Telegram {method} failed on Telegram's side: {description} (HTTP {status})")]
    Server {
        /// The method called.
        method: &'static str,
        /// HTTP status.
        status: u16,
        /// Telegram's description, scrubbed of the token.
        description: String,
    },
    /// No answer within the request's timeout.
    #[error("Telegram {method} got no answer within {seconds} s")]
    Timeout {
        /// The method called.
        method: &'static str,
        /// The timeout that passed.
        seconds: u64,
    },
    /// The connection failed or dropped (DNS, refused, reset, TLS).
    #[error("Telegram {method} could not reach the Bot API at {host}: {detail}")]
    Network {
        /// The method called.
        method: &'static str,
        /// The base URL's host, never a path.
        host: String,
        /// What the network stack said, without any URL.
        detail: String,
    },
    /// The answer was not a Bot API answer (a proxy's error page, a truncated body).
    #[error(
        "Telegram {method} answered with something that is not a Bot API response (HTTP {status}): {detail}"
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

impl Failure for ApiError {
    fn outcome(&self) -> Outcome {
        match self {
            ApiError::RateLimited { retry_after_ms, .. } => Outcome::RateLimited {
                retry_after_ms: *retry_after_ms,
            },
            ApiError::Server { .. } | ApiError::Timeout { .. } | ApiError::Network { .. } => {
                Outcome::Transient
            }
            // A proxy's HTML error page in the middle of an outage is as transient as a 502.
            ApiError::Malformed { status, .. } if *status >= 500 => Outcome::Transient,
            _ => Outcome::Fatal,
        }
    }
}

impl ApiError {
    /// The description Telegram gave, for the few errors a caller reacts to by text
    /// ("can't parse entities", "message is not modified").
    pub fn description(&self) -> Option<&str> {
        match self {
            ApiError::Rejected { description, .. } => Some(description),
            _ => None,
        }
    }
}

/// Why an attachment could not be fetched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DownloadError {
    /// The size Telegram declared, or the bytes received, are over the caller's limit.
    #[error(transparent)]
    TooLarge(#[from] OverCap),
    /// Telegram gave no path: bots can only download files up to 20 MB.
    #[error(
        "Telegram gave no download path for this file: bots can download files of up to 20 MB only"
    )]
    NoPath,
    /// The file server answered with an error status.
    #[error(
        "the Telegram file server answered HTTP {status} for this attachment (download links expire after an hour; sending the file again helps)"
    )]
    Status {
        /// HTTP status.
        status: u16,
    },
    /// `getFile` or the download itself failed.
    #[error(transparent)]
    Api(#[from] ApiError),
}

pub use transport_core::retry::Retry;

/// A file for [`BotApi::send_file`].
#[derive(Debug, Clone, Copy)]
pub struct Upload<'a> {
    /// File name as the chat shows it.
    pub name: &'a str,
    /// Media type.
    pub media_type: &'a str,
    /// Plain-text caption; empty for none.
    pub caption: &'a str,
    /// `sendPhoto` rather than `sendDocument`.
    pub as_photo: bool,
    /// The bytes.
    pub data: &'a [u8],
}

fn upload_form(
    chat_id: &ChatId,
    thread_id: Option<i64>,
    upload: &Upload<'_>,
) -> Result<reqwest::multipart::Form, String> {
    let chat = match chat_id {
        ChatId::Id(id) => id.to_string(),
        ChatId::Username(name) => name.clone(),
    };
    let part = reqwest::multipart::Part::bytes(upload.data.to_vec())
        .file_name(upload.name.to_owned())
        .mime_str(upload.media_type)
        .map_err(|error| {
            format!(
                "the media type {:?} is not one ({error})",
                upload.media_type
            )
        })?;
    let mut form = reqwest::multipart::Form::new().text("chat_id", chat);
    if let Some(thread) = thread_id {
        form = form.text("message_thread_id", thread.to_string());
    }
    if !upload.caption.is_empty() {
        form = form.text("caption", upload.caption.to_owned());
    }
    let field = if upload.as_photo { "photo" } else { "document" };
    Ok(form.part(field, part))
}

/// How the client is set up.
#[derive(Debug, Clone)]
pub struct ClientSettings {
    /// Base URL without a trailing slash (`https://api.telegram.org`).
    pub base_url: String,
    /// The token.
    pub token: Secret,
    /// Name of the environment variable the token came from, for error messages.
    pub token_env: String,
    /// Timeout of an ordinary request.
    pub request_timeout: Duration,
    /// Timeout of a file download.
    pub download_timeout: Duration,
    /// Retries within one call.
    pub policy: RetryPolicy,
}

/// A Bot API client for one bot.
pub struct BotApi {
    http: reqwest::Client,
    settings: ClientSettings,
    host: String,
    retrier: Retrier,
}

impl std::fmt::Debug for BotApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BotApi")
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

impl BotApi {
    /// A client for `settings`; `jitter` spreads retries (fixed in tests).
    pub fn new(settings: ClientSettings, jitter: Box<dyn Jitter>) -> Result<BotApi, String> {
        let base = reqwest::Url::parse(&settings.base_url).map_err(|error| {
            format!(
                "Telegram baseUrl {:?} is not a URL: {error}",
                settings.token.scrub(&settings.base_url)
            )
        })?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(format!(
                "Telegram baseUrl must start with https:// (or http:// for a local test server), not {}://",
                base.scheme()
            ));
        }
        Ok(BotApi {
            http: http_client("Telegram", &base, USER_AGENT).map_err(|error| error.to_string())?,
            host: settings.token.scrub(&origin(&base)),
            retrier: Retrier::new(settings.policy, jitter),
            settings: ClientSettings {
                base_url: settings.base_url.trim_end_matches('/').to_owned(),
                ..settings
            },
        })
    }

    /// Retries made so far (for `diagnose`).
    pub fn retries(&self) -> u64 {
        self.retrier.retries()
    }

    /// The token, for scrubbing texts built elsewhere.
    pub fn token(&self) -> &Secret {
        &self.settings.token
    }

    /// Where the API is, as error messages may show it.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// `getMe`: who the bot is; the first call that proves the token.
    pub async fn get_me(&self) -> Result<User, ApiError> {
        self.call(
            "getMe",
            &serde_json::json!({}),
            self.settings.request_timeout,
            Retry::All,
        )
        .await
    }

    /// `getUpdates`, long polling for up to `timeout`. The request's own timeout is the
    /// poll's plus 10 s, or a healthy long poll would be cut off
    /// (docs/protocols.md#telegram-long-polling). Updates come back raw, so one the
    /// transport cannot parse still has an `update_id` to skip.
    pub async fn get_updates(
        &self,
        offset: Option<i64>,
        timeout: Duration,
    ) -> Result<Vec<serde_json::Value>, ApiError> {
        let params = GetUpdates {
            offset,
            timeout: timeout.as_secs(),
            allowed_updates: ALLOWED_UPDATES,
        };
        let updates: serde_json::Value = self
            .call(
                "getUpdates",
                &params,
                timeout + Duration::from_secs(10),
                Retry::Never,
            )
            .await?;
        match updates {
            serde_json::Value::Array(updates) => Ok(updates),
            // The docs promise an array; anything else is read as "no updates".
            _ => Ok(Vec::new()),
        }
    }

    /// `sendMessage`; `parse_mode` `Some("HTML")` or `None` for plain text, with an
    /// inline keyboard when `keyboard` is given, as a reply to message `reply_to` when given.
    pub async fn send_message(
        &self,
        chat_id: &ChatId,
        thread_id: Option<i64>,
        text: &str,
        parse_mode: Option<&'static str>,
        keyboard: Option<&InlineKeyboardMarkup>,
        reply_to: Option<i64>,
    ) -> Result<i64, ApiError> {
        let params = SendMessage {
            chat_id,
            message_thread_id: thread_id,
            text,
            parse_mode,
            reply_markup: keyboard,
            reply_parameters: reply_to.map(|message_id| ReplyParameters {
                message_id,
                allow_sending_without_reply: true,
            }),
        };
        let sent: SentMessage = self
            .call(
                "sendMessage",
                &params,
                self.settings.request_timeout,
                Retry::Transient,
            )
            .await?;
        Ok(sent.message_id)
    }

    /// `sendDocument`, or `sendPhoto` when `as_photo`: one `multipart/form-data` upload
    /// with `chat_id`, `message_thread_id` when set, `caption` when not empty (plain text),
    /// and the file under `document` or `photo` with its name and media type. Timed like a
    /// download: megabytes over a slow uplink take longer than a message.
    pub async fn send_file(
        &self,
        chat_id: &ChatId,
        thread_id: Option<i64>,
        upload: &Upload<'_>,
    ) -> Result<i64, ApiError> {
        let method = if upload.as_photo {
            "sendPhoto"
        } else {
            "sendDocument"
        };
        let timeout = self.settings.download_timeout;
        let sent: SentMessage = self
            .retrier
            .call(Retry::Transient, || async {
                // A form is consumed by its send: each attempt builds its own.
                let form = upload_form(chat_id, thread_id, upload).map_err(|detail| {
                    ApiError::Malformed {
                        method,
                        status: 0,
                        detail,
                    }
                })?;
                let url = format!(
                    "{}/bot{}/{method}",
                    self.settings.base_url,
                    self.settings.token.expose()
                );
                let response = self
                    .http
                    .post(url)
                    .multipart(form)
                    .timeout(timeout)
                    .send()
                    .await
                    .map_err(|error| self.transport_error(method, timeout, error))?;
                let status = response.status().as_u16();
                let body = response
                    .bytes()
                    .await
                    .map_err(|error| self.transport_error(method, timeout, error))?;
                self.read_answer(method, status, &body)
            })
            .await?;
        Ok(sent.message_id)
    }

    /// `editMessageText`.
    pub async fn edit_message_text(
        &self,
        chat_id: &ChatId,
        message_id: i64,
        text: &str,
        parse_mode: Option<&'static str>,
        reply_markup: Option<&InlineKeyboardMarkup>,
    ) -> Result<(), ApiError> {
        let params = EditMessageText {
            chat_id,
            message_id,
            text,
            parse_mode,
            reply_markup,
        };
        // The result is the edited message (or `true` for inline messages): not needed.
        let _: serde_json::Value = self
            .call(
                "editMessageText",
                &params,
                self.settings.request_timeout,
                Retry::Transient,
            )
            .await?;
        Ok(())
    }

    /// `sendMessageDraft` in HTML. One attempt: the next draft replaces this one within a
    /// second, so a retry would only show an older text.
    pub async fn send_message_draft(
        &self,
        chat_id: i64,
        thread_id: Option<i64>,
        draft_id: i64,
        text: &str,
    ) -> Result<(), ApiError> {
        let params = SendMessageDraft {
            chat_id,
            message_thread_id: thread_id,
            draft_id,
            text,
            parse_mode: "HTML",
        };
        let _: serde_json::Value = self
            .call(
                "sendMessageDraft",
                &params,
                self.settings.request_timeout,
                Retry::Never,
            )
            .await?;
        Ok(())
    }

    /// `setMessageReaction` with one emoji, replacing whatever the bot had set there. One
    /// attempt: a reaction is a courtesy, and a late one is worth nothing.
    pub async fn set_message_reaction(
        &self,
        chat_id: &ChatId,
        message_id: i64,
        emoji: &'static str,
    ) -> Result<(), ApiError> {
        let params = SetMessageReaction {
            chat_id,
            message_id,
            reaction: [ReactionTypeEmoji {
                kind: "emoji",
                emoji,
            }],
        };
        let _: serde_json::Value = self
            .call(
                "setMessageReaction",
                &params,
                self.settings.request_timeout,
                Retry::Never,
            )
            .await?;
        Ok(())
    }

    /// `sendChatAction` `typing`: one attempt with a short timeout, since the hint is
    /// worthless late and must never hold anything up (I24).
    pub async fn send_typing(
        &self,
        chat_id: &ChatId,
        thread_id: Option<i64>,
    ) -> Result<(), ApiError> {
        let params = SendChatAction {
            chat_id,
            message_thread_id: thread_id,
            action: "typing",
        };
        let timeout = self.settings.request_timeout.min(Duration::from_secs(5));
        let _: serde_json::Value = self
            .call("sendChatAction", &params, timeout, Retry::Never)
            .await?;
        Ok(())
    }

    /// `answerCallbackQuery`: stops the spinner on the presser's phone, with `text` as a
    /// short notification when given (an alert to dismiss with `show_alert`). Only the
    /// presser sees it. One attempt with a short timeout: Telegram refuses an answer after
    /// about 15 s anyway, and a late spinner stop is worth nothing.
    pub async fn answer_callback_query(
        &self,
        callback_query_id: &str,
        text: Option<&str>,
        show_alert: bool,
    ) -> Result<(), ApiError> {
        let params = AnswerCallbackQuery {
            callback_query_id,
            text,
            show_alert,
        };
        let timeout = self.settings.request_timeout.min(Duration::from_secs(5));
        let _: serde_json::Value = self
            .call("answerCallbackQuery", &params, timeout, Retry::Never)
            .await?;
        Ok(())
    }

    /// `createForumTopic`. One attempt: a retry after a lost answer would make a second
    /// topic of the same name.
    pub async fn create_forum_topic(
        &self,
        chat_id: &ChatId,
        name: &str,
    ) -> Result<ForumTopic, ApiError> {
        self.call(
            "createForumTopic",
            &CreateForumTopic { chat_id, name },
            self.settings.request_timeout,
            Retry::Never,
        )
        .await
    }

    /// `editForumTopic`, `closeForumTopic` or `reopenForumTopic` (`method`): each may be
    /// repeated without harm, so passing failures are retried.
    pub async fn change_forum_topic(
        &self,
        method: &'static str,
        chat_id: &ChatId,
        message_thread_id: i64,
        name: Option<&str>,
    ) -> Result<(), ApiError> {
        let params = ForumTopicChange {
            chat_id,
            message_thread_id,
            name,
        };
        let _: serde_json::Value = self
            .call(
                method,
                &params,
                self.settings.request_timeout,
                Retry::Transient,
            )
            .await?;
        Ok(())
    }

    /// `getFile`: where to download a file.
    pub async fn get_file(&self, file_id: &str) -> Result<File, ApiError> {
        self.call(
            "getFile",
            &GetFile { file_id },
            self.settings.request_timeout,
            Retry::All,
        )
        .await
    }

    /// Downloads `/file/bot<token>/<file_path>`, refusing more than `limit` bytes: the
    /// declared `Content-Length` first, then the bytes actually received (I19), so a server
    /// that lies about the length still cannot make the bridge read more. Returns the
    /// `Content-Type` header and the bytes.
    pub async fn download(
        &self,
        file_path: &str,
        limit: u64,
    ) -> Result<(Option<String>, Vec<u8>), DownloadError> {
        const METHOD: &str = "file download";
        let url = format!(
            "{}/file/bot{}/{}",
            self.settings.base_url,
            self.settings.token.expose(),
            file_path.trim_start_matches('/')
        );
        let timeout = self.settings.download_timeout;
        let response = self
            .http
            .get(url)
            .timeout(timeout)
            .send()
            .await
            .map_err(|error| self.transport_error(METHOD, timeout, error))?;
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
            detail: self.settings.token.scrub(&describe(error)),
        }
    }

    /// One method call with `retry`'s retries under the shared policy.
    async fn call<P: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: &'static str,
        params: &P,
        timeout: Duration,
        retry: Retry,
    ) -> Result<T, ApiError> {
        self.retrier
            .call(retry, || self.attempt(method, params, timeout))
            .await
    }

    async fn attempt<P: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: &'static str,
        params: &P,
        timeout: Duration,
    ) -> Result<T, ApiError> {
        let url = format!(
            "{}/bot{}/{method}",
            self.settings.base_url,
            self.settings.token.expose()
        );
        let response = self
            .http
            .post(url)
            .json(params)
            .timeout(timeout)
            .send()
            .await
            .map_err(|error| self.transport_error(method, timeout, error))?;
        let status = response.status().as_u16();
        let body = response
            .bytes()
            .await
            .map_err(|error| self.transport_error(method, timeout, error))?;
        self.read_answer(method, status, &body)
    }

    /// Reads a Bot API answer: the result when `ok`, otherwise the error it stands for.
    fn read_answer<T: DeserializeOwned>(
        &self,
        method: &'static str,
        status: u16,
        body: &[u8],
    ) -> Result<T, ApiError> {
        let token = &self.settings.token;
        let answer: ApiResponse<serde_json::Value> = match serde_json::from_slice(body) {
            Ok(answer) => answer,
            Err(_) if status >= 500 => {
                return Err(ApiError::Server {
                    method,
                    status,
                    description: "no Bot API answer in the body".to_owned(),
                });
            }
            Err(error) => {
                return Err(ApiError::Malformed {
                    method,
                    status,
                    detail: format!("the body is not JSON ({error})"),
                });
            }
        };
        if answer.ok && (200..300).contains(&status) {
            let result = answer.result.unwrap_or(serde_json::Value::Null);
            return serde_json::from_value(result).map_err(|error| ApiError::Malformed {
                method,
                status,
                detail: token.scrub(&format!("the result has an unexpected shape ({error})")),
            });
        }
        // The HTTP status and `error_code` agree on Telegram; an answer with `ok: false`
        // but status 200 is read by its `error_code`.
        let code = if (200..300).contains(&status) {
            answer
                .error_code
                .and_then(|code| u16::try_from(code).ok())
                .unwrap_or(400)
        } else {
            status
        };
        let description = token.scrub(
            answer
                .description
                .as_deref()
                .unwrap_or("no description given"),
        );
        Err(match code {
            401 => ApiError::Unauthorized {
                env: self.settings.token_env.clone(),
            },
            404 => ApiError::NotFound {
                method,
                env: self.settings.token_env.clone(),
                host: self.host.clone(),
            },
            409 if description.to_ascii_lowercase().contains("webhook") => {
                ApiError::WebhookActive { method }
            }
            409 => ApiError::Conflict { method },
            429 => ApiError::RateLimited {
                method,
                retry_after_ms: answer
                    .parameters
                    .and_then(|parameters| parameters.retry_after)
                    .unwrap_or(1)
                    .saturating_mul(1_000),
            },
            500..=599 => ApiError::Server {
                method,
                status: code,
                description,
            },
            _ => ApiError::Rejected {
                method,
                status: code,
                description,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transport_core::jitter::FixedJitter;

    const TOKEN: &str = "123456:SECRET-abc_DEF";

    fn api() -> BotApi {
        BotApi::new(
            ClientSettings {
                base_url: "http://127.0.0.1:9/".to_owned(),
                token: Secret::new(TOKEN),
                token_env: "PI_TELEGRAM_TOKEN".to_owned(),
                request_timeout: Duration::from_secs(1),
                download_timeout: Duration::from_secs(1),
                policy: RetryPolicy::REQUEST,
            },
            Box::new(FixedJitter(0.0)),
        )
        .expect("client")
    }

    fn error(status: u16, body: &str) -> ApiError {
        api()
            .read_answer::<serde_json::Value>("sendMessage", status, body.as_bytes())
            .expect_err("an error")
    }

    #[test]
    fn answers_are_read_as_the_errors_they_stand_for() {
        assert_eq!(
            error(
                429,
                r#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 7","parameters":{"retry_after":7}}"#
            ),
            ApiError::RateLimited {
                method: "sendMessage",
                retry_after_ms: 7_000
            }
        );
        assert_eq!(
            error(
                401,
                r#"{"ok":false,"error_code":401,"description":"Unauthorized"}"#
            ),
            ApiError::Unauthorized {
                env: "PI_TELEGRAM_TOKEN".to_owned()
            }
        );
        assert_eq!(
            error(
                409,
                r#"{"ok":false,"error_code":409,"description":"Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"}"#
            ),
            ApiError::Conflict {
                method: "sendMessage"
            }
        );
        assert_eq!(
            error(
                409,
                r#"{"ok":false,"error_code":409,"description":"Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"}"#
            ),
            ApiError::WebhookActive {
                method: "sendMessage"
            }
        );
        assert_eq!(
            error(502, "<html>Bad Gateway</html>").outcome(),
            Outcome::Transient
        );
        assert_eq!(
            error(
                400,
                r#"{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}"#
            )
            .outcome(),
            Outcome::Fatal
        );
        assert_eq!(
            error(
                200,
                r#"{"ok":false,"error_code":400,"description":"Bad Request: odd"}"#
            )
            .description(),
            Some("Bad Request: odd")
        );
        assert!(matches!(error(200, "not json"), ApiError::Malformed { .. }));
    }

    #[test]
    fn a_description_echoing_the_token_is_scrubbed() {
        let text = error(
            400,
            &format!(r#"{{"ok":false,"error_code":400,"description":"bad path /bot{TOKEN}/x"}}"#),
        )
        .to_string();
        assert!(!text.contains(TOKEN), "{text}");
        assert!(text.contains("/bot<token>/x"), "{text}");
    }

    #[test]
    fn the_unauthorized_text_names_the_variable_and_never_the_token() {
        let text = ApiError::Unauthorized {
            env: "PI_TELEGRAM_TOKEN".to_owned(),
        }
        .to_string();
        assert!(text.contains("$PI_TELEGRAM_TOKEN"), "{text}");
        assert!(!text.contains(TOKEN));
    }

    #[test]
    fn tokens_are_checked_for_shape() {
        assert!(looks_like_bot_token(&Secret::new(" 123:AAbb-_9\n")));
        for bad in ["", "123", ":abc", "abc:def", "123:ab/c", "123:a b"] {
            assert!(!looks_like_bot_token(&Secret::new(bad)), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn a_refused_connection_is_described_without_the_url() {
        let error = api().get_me().await.expect_err("nothing listens on port 9");
        let text = error.to_string();
        assert!(matches!(error, ApiError::Network { .. }), "{text}");
        assert!(!text.contains(TOKEN) && !text.contains("/bot"), "{text}");
        assert!(text.contains("http://127.0.0.1:9"), "{text}");
    }
}
