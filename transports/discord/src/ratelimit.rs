//! Discord's REST rate limits as plain data (docs/protocols.md#discord-rate-limits):
//! per-route buckets learned from the `X-RateLimit-*` headers, the global limit (50
//! requests a second, and a 429 with `global: true`), and what a 429 teaches.
//!
//! Why keep state at all, when a 429 says how long to wait: Discord counts 429s. Ten
//! thousand 401/403/429 answers in ten minutes get the host's IP banned by Cloudflare for
//! an hour, and a bot that learns its limits only from 429s produces them steadily. So
//! each answer's headers say how many requests the route's bucket has left and when it
//! refills; a call that would exceed them waits *before* it is sent.
//!
//! A bucket is keyed like twilight's: the bucket id Discord names in `X-RateLimit-Bucket`
//! (several routes may share one) plus the route's top-level resource (the channel id):
//! two channels never share a bucket even when the id is the same. Until the first answer
//! names a bucket, the route template itself stands for it.
//!
//! Everything here is pure: time comes in as an argument, so tests move it by hand.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The global limit: requests per second per bot.
pub const GLOBAL_PER_SECOND: u32 = 50;

/// A route: method, path template and its top-level resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Route {
    /// `POST /channels/{channel_id}/messages`: what Discord buckets by.
    pub template: &'static str,
    /// The top-level resource (channel id), empty when the route has none.
    pub major: String,
}

impl Route {
    /// `POST /channels/{channel_id}/messages` for `channel`.
    pub fn create_message(channel: &str) -> Route {
        Route {
            template: "POST /channels/{channel_id}/messages",
            major: channel.to_owned(),
        }
    }

    /// `PUT` and `DELETE /channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me`
    /// for `channel`: Discord limits reactions per channel far tighter than messages, so
    /// they wait in a bucket of their own and never hold up a reply.
    pub fn reaction(channel: &str) -> Route {
        Route {
            template: "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me",
            major: channel.to_owned(),
        }
    }

    /// `PATCH /channels/{channel_id}/messages/{message_id}` for `channel` (every message
    /// of a channel shares the bucket).
    pub fn edit_message(channel: &str) -> Route {
        Route {
            template: "PATCH /channels/{channel_id}/messages/{message_id}",
            major: channel.to_owned(),
        }
    }

    /// `POST /interactions/{interaction_id}/{token}/callback` for one interaction (each
    /// interaction is its own resource: answering one never waits for another's bucket).
    pub fn interaction_callback(interaction: &str) -> Route {
        Route {
            template: "POST /interactions/{interaction_id}/{interaction_token}/callback",
            major: interaction.to_owned(),
        }
    }

    /// `POST /webhooks/{application_id}/{interaction_token}` (a follow-up) for one
    /// interaction: keyed by the interaction's id, never by its token.
    pub fn followup(interaction: &str) -> Route {
        Route {
            template: "POST /webhooks/{application_id}/{interaction_token}",
            major: interaction.to_owned(),
        }
    }

    /// `POST /channels/{channel_id}/typing` for `channel`.
    pub fn typing(channel: &str) -> Route {
        Route {
            template: "POST /channels/{channel_id}/typing",
            major: channel.to_owned(),
        }
    }

    /// `POST /channels/{channel_id}/threads` for `channel` (a thread without a message).
    pub fn start_thread(channel: &str) -> Route {
        Route {
            template: "POST /channels/{channel_id}/threads",
            major: channel.to_owned(),
        }
    }

    /// `PATCH /channels/{channel_id}` for `channel` (a thread's name or archived state).
    pub fn modify_channel(channel: &str) -> Route {
        Route {
            template: "PATCH /channels/{channel_id}",
            major: channel.to_owned(),
        }
    }

    /// `GET /users/@me`.
    pub fn me() -> Route {
        Route {
            template: "GET /users/@me",
            major: String::new(),
        }
    }

    /// `GET /gateway/bot`.
    pub fn gateway_bot() -> Route {
        Route {
            template: "GET /gateway/bot",
            major: String::new(),
        }
    }
}

/// What one answer's headers said (all optional: a proxy may strip them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Headers {
    /// `X-RateLimit-Bucket`.
    pub bucket: Option<String>,
    /// `X-RateLimit-Limit`.
    pub limit: Option<u64>,
    /// `X-RateLimit-Remaining`.
    pub remaining: Option<u64>,
    /// `X-RateLimit-Reset-After`, fractional seconds.
    pub reset_after: Option<Duration>,
}

impl Headers {
    /// Reads the headers with `get(name)` (case-insensitive lookup by the caller). A
    /// value that does not parse counts as absent.
    pub fn read(get: impl Fn(&str) -> Option<String>) -> Headers {
        Headers {
            bucket: get("x-ratelimit-bucket").filter(|bucket| !bucket.is_empty()),
            limit: get("x-ratelimit-limit").and_then(|value| value.trim().parse().ok()),
            remaining: get("x-ratelimit-remaining").and_then(|value| value.trim().parse().ok()),
            reset_after: get("x-ratelimit-reset-after").and_then(|value| seconds(&value)),
        }
    }
}

/// Fractional seconds (`"64.57"`) as a duration; `None` for anything negative or not a
/// number.
pub fn seconds(value: &str) -> Option<Duration> {
    let seconds: f64 = value.trim().parse().ok()?;
    Duration::try_from_secs_f64(seconds).ok()
}

#[derive(Debug, Clone, Default)]
struct Bucket {
    limit: Option<u64>,
    remaining: Option<u64>,
    reset_at: Option<Instant>,
}

/// Waits so far, for `diagnose`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WaitStats {
    /// Calls that had to wait for a bucket or the global limit before being sent.
    pub waits: u64,
    /// Their waiting time in all.
    pub waited: Duration,
    /// 429 answers received.
    pub limited: u64,
}

/// The limiter's state for one bot.
#[derive(Debug, Default)]
pub struct RateLimits {
    /// Route template → the bucket id Discord named for it.
    routes: HashMap<&'static str, String>,
    /// (bucket id or route template, major) → state.
    buckets: HashMap<(String, String), Bucket>,
    /// A global 429 blocks every route until then.
    global_until: Option<Instant>,
    /// The current one-second window of the global limit and the calls sent in it.
    window: Option<(Instant, u32)>,
    stats: WaitStats,
}

impl RateLimits {
    /// A limiter that knows nothing yet.
    pub fn new() -> RateLimits {
        RateLimits::default()
    }

    fn key(&self, route: &Route) -> (String, String) {
        let bucket = self
            .routes
            .get(route.template)
            .cloned()
            .unwrap_or_else(|| route.template.to_owned());
        (bucket, route.major.clone())
    }

    /// How long `route` must wait before a call may be sent at `now`. `Duration::ZERO`
    /// means "send now", and the call is counted against its bucket and the global
    /// limit; anything longer means "ask again after that long" (nothing is counted).
    pub fn acquire(&mut self, route: &Route, now: Instant) -> Duration {
        let key = self.key(route);
        let bucket = self.buckets.entry(key).or_default();
        if bucket.reset_at.is_some_and(|reset| reset <= now) {
            // The bucket refilled; until the next answer says otherwise it is full.
            bucket.remaining = bucket.limit;
            bucket.reset_at = None;
        }
        let mut wait = Duration::ZERO;
        if bucket.remaining == Some(0)
            && let Some(reset) = bucket.reset_at
        {
            wait = wait.max(reset.saturating_duration_since(now));
        }
        if let Some(until) = self.global_until {
            if until > now {
                wait = wait.max(until - now);
            } else {
                self.global_until = None;
            }
        }
        match self.window {
            Some((start, sent))
                if now.saturating_duration_since(start) < Duration::from_secs(1)
                    && sent >= GLOBAL_PER_SECOND =>
            {
                wait = wait.max(start + Duration::from_secs(1) - now);
            }
            _ => {}
        }
        if !wait.is_zero() {
            return wait;
        }
        if let Some(remaining) = bucket.remaining.as_mut() {
            *remaining = remaining.saturating_sub(1);
        }
        self.window = match self.window {
            Some((start, sent))
                if now.saturating_duration_since(start) < Duration::from_secs(1) =>
            {
                Some((start, sent + 1))
            }
            _ => Some((now, 1)),
        };
        Duration::ZERO
    }

    /// Records that a call waited `waited` before it could be sent.
    pub fn waited(&mut self, waited: Duration) {
        self.stats.waits += 1;
        self.stats.waited += waited;
    }

    /// Learns from an answer's headers, received at `now`.
    pub fn observe(&mut self, route: &Route, headers: &Headers, now: Instant) {
        if let Some(bucket) = &headers.bucket {
            let known = self.routes.get(route.template);
            if known != Some(bucket) {
                self.routes.insert(route.template, bucket.clone());
            }
        }
        if headers.limit.is_none() && headers.remaining.is_none() && headers.reset_after.is_none() {
            return;
        }
        let key = self.key(route);
        let state = self.buckets.entry(key).or_default();
        if headers.limit.is_some() {
            state.limit = headers.limit;
        }
        if headers.remaining.is_some() {
            state.remaining = headers.remaining;
        }
        if let Some(after) = headers.reset_after {
            state.reset_at = Some(now + after);
        }
    }

    /// Learns from a 429: the route's bucket (or, when `global`, every route) is empty
    /// for `retry_after` from `now`.
    pub fn limited(&mut self, route: &Route, retry_after: Duration, global: bool, now: Instant) {
        self.stats.limited += 1;
        let until = now + retry_after;
        if global {
            self.global_until = Some(self.global_until.map_or(until, |at| at.max(until)));
            return;
        }
        let key = self.key(route);
        let state = self.buckets.entry(key).or_default();
        state.remaining = Some(0);
        state.reset_at = Some(state.reset_at.map_or(until, |at| at.max(until)));
    }

    /// Waits and 429s so far.
    pub fn stats(&self) -> WaitStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(bucket: &str, remaining: u64, reset_after_ms: u64) -> Headers {
        Headers {
            bucket: Some(bucket.to_owned()),
            limit: Some(5),
            remaining: Some(remaining),
            reset_after: Some(Duration::from_millis(reset_after_ms)),
        }
    }

    #[test]
    fn an_empty_bucket_holds_the_next_call_until_it_refills() {
        let mut limits = RateLimits::new();
        let start = Instant::now();
        let route = Route::create_message("1");
        assert_eq!(limits.acquire(&route, start), Duration::ZERO);
        limits.observe(&route, &headers("abc", 0, 2_500), start);
        assert_eq!(
            limits.acquire(&route, start + Duration::from_millis(500)),
            Duration::from_secs(2)
        );
        // After the reset the bucket is full again (its limit), and counts down.
        let later = start + Duration::from_millis(2_500);
        for _ in 0..5 {
            assert_eq!(limits.acquire(&route, later), Duration::ZERO);
        }
        assert_eq!(
            limits.acquire(&route, later),
            Duration::ZERO,
            "no reset known yet"
        );
    }

    #[test]
    fn remaining_calls_are_counted_before_the_answers_come_back() {
        let mut limits = RateLimits::new();
        let now = Instant::now();
        let route = Route::create_message("1");
        limits.observe(&route, &headers("abc", 2, 1_000), now);
        assert_eq!(limits.acquire(&route, now), Duration::ZERO);
        assert_eq!(limits.acquire(&route, now), Duration::ZERO);
        assert_eq!(limits.acquire(&route, now), Duration::from_secs(1));
    }

    #[test]
    fn buckets_are_per_channel_even_when_discord_names_the_same_bucket() {
        let mut limits = RateLimits::new();
        let now = Instant::now();
        let one = Route::create_message("1");
        let two = Route::create_message("2");
        limits.observe(&one, &headers("abc", 0, 3_000), now);
        assert_eq!(limits.acquire(&one, now), Duration::from_secs(3));
        assert_eq!(limits.acquire(&two, now), Duration::ZERO);
        // Another route of the same channel has its own bucket too.
        assert_eq!(
            limits.acquire(&Route::edit_message("1"), now),
            Duration::ZERO
        );
    }

    #[test]
    fn a_429_empties_the_bucket_for_retry_after_and_a_global_one_stops_every_route() {
        let mut limits = RateLimits::new();
        let now = Instant::now();
        let route = Route::edit_message("1");
        limits.limited(&route, Duration::from_millis(1_250), false, now);
        assert_eq!(limits.acquire(&route, now), Duration::from_millis(1_250));
        assert_eq!(limits.acquire(&Route::typing("1"), now), Duration::ZERO);

        limits.limited(&Route::me(), Duration::from_millis(700), true, now);
        assert_eq!(
            limits.acquire(&Route::typing("9"), now),
            Duration::from_millis(700)
        );
        let later = now + Duration::from_millis(700);
        assert_eq!(limits.acquire(&Route::typing("9"), later), Duration::ZERO);
        assert_eq!(limits.stats().limited, 2);
    }

    #[test]
    fn the_global_limit_allows_fifty_calls_a_second() {
        let mut limits = RateLimits::new();
        let now = Instant::now();
        for channel in 0..GLOBAL_PER_SECOND {
            let route = Route::typing(&channel.to_string());
            assert_eq!(limits.acquire(&route, now), Duration::ZERO);
        }
        let route = Route::typing("x");
        let wait = limits.acquire(&route, now + Duration::from_millis(400));
        assert_eq!(wait, Duration::from_millis(600));
        assert_eq!(
            limits.acquire(&route, now + Duration::from_secs(1)),
            Duration::ZERO
        );
    }

    #[test]
    fn headers_parse_fractional_seconds_and_ignore_garbage() {
        let read = Headers::read(|name| match name {
            "x-ratelimit-bucket" => Some("abcd1234".to_owned()),
            "x-ratelimit-limit" => Some("5".to_owned()),
            "x-ratelimit-remaining" => Some("nope".to_owned()),
            "x-ratelimit-reset-after" => Some("1.337".to_owned()),
            _ => None,
        });
        assert_eq!(read.bucket.as_deref(), Some("abcd1234"));
        assert_eq!(read.limit, Some(5));
        assert_eq!(read.remaining, None);
        assert_eq!(read.reset_after, Some(Duration::from_millis(1_337)));
        assert_eq!(seconds("-1"), None);
        assert_eq!(seconds("NaN"), None);
        assert_eq!(seconds("64.57"), Some(Duration::from_millis(64_570)));
    }
}
