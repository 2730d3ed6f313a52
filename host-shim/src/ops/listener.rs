//! The opt-in HTTP listener (`--metrics ADDR`): `GET /metrics` (OpenMetrics text),
//! `GET /healthz` and `GET /readyz`. Nothing else is served, nothing is ever written
//! through it, and it reads no request body: it is safe to point a scraper or a probe at.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::dashboard::{self, View};
use super::health::{self, Check};
use super::metrics::Metrics;

/// How long a client may take to send its request's head: a connection that never
/// finishes one must not hold a slot for ever.
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections served at once; more wait in the kernel's backlog. A scraper and a few
/// probes need a handful; the bound keeps a flood from taking every file descriptor.
const MAX_CONNECTIONS: usize = 32;

/// The content type of the OpenMetrics text `prometheus-client` writes.
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Refreshes the gauges read at scrape time (sessions by state, counts kept elsewhere).
pub type Refresh = Arc<dyn Fn(&Metrics) + Send + Sync>;

/// Runs the readiness checks of this process.
pub type Readiness = Arc<dyn Fn() -> Vec<Check> + Send + Sync>;

/// What the listener answers from.
#[derive(Clone)]
pub struct Endpoints {
    /// The process's metrics.
    pub metrics: Arc<Metrics>,
    /// Called before each scrape.
    pub refresh: Refresh,
    /// Called for each `/readyz`.
    pub ready: Readiness,
    /// The dashboard, when this listener serves one.
    pub dashboard: Option<Dashboard>,
}

/// The dashboard's token and what its page shows.
#[derive(Clone)]
pub struct Dashboard {
    /// The token printed at the terminal.
    pub token: String,
    /// The page's content, read at each request.
    pub view: Arc<dyn Fn() -> View + Send + Sync>,
}

/// What the listener reads of a request.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    /// The method.
    pub method: &'a Method,
    /// The path.
    pub path: &'a str,
    /// The query, without `?`.
    pub query: Option<&'a str>,
    /// The `Cookie` header.
    pub cookies: Option<&'a str>,
}

/// Why the listener did not start.
#[derive(Debug, thiserror::Error)]
pub enum ListenerError {
    /// The address could not be bound.
    #[error(
        "cannot listen on {addr} for --metrics ({source}); pick a free port, e.g. --metrics 127.0.0.1:9464"
    )]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The system's error.
        source: std::io::Error,
    },
}

/// A running listener; it stops when dropped.
#[derive(Debug)]
pub struct Listener {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    /// The bound address (the real port when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One answer: status, content type, body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status.
    pub status: StatusCode,
    /// Its content type.
    pub content_type: &'static str,
    /// Its body.
    pub body: String,
    /// Further headers.
    pub headers: Vec<(&'static str, String)>,
}

/// The dashboard's headers: no script, no frame, no referrer, no cache.
const PAGE_POLICY: &str =
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'none'; frame-ancestors 'none'";

impl Answer {
    fn text(status: StatusCode, body: impl Into<String>) -> Answer {
        Answer {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
            headers: Vec::new(),
        }
    }

    fn page(status: StatusCode, body: String) -> Answer {
        Answer {
            status,
            content_type: "text/html; charset=utf-8",
            body,
            headers: vec![
                ("content-security-policy", PAGE_POLICY.to_owned()),
                ("x-frame-options", "DENY".to_owned()),
                ("referrer-policy", "no-referrer".to_owned()),
                ("x-content-type-options", "nosniff".to_owned()),
            ],
        }
    }
}

/// `/dashboard`: the page with the right token; a token in the query is moved into a cookie
/// and the browser sent back without it, so it stays out of the address bar and history.
fn dashboard(asked: &Asked<'_>, dashboard: &Dashboard) -> Answer {
    let offered = dashboard::offered_token(asked.query, asked.cookies);
    if !offered.is_some_and(|t| dashboard::token_matches(t, &dashboard.token)) {
        return Answer::page(StatusCode::UNAUTHORIZED, dashboard::refused());
    }
    if asked.query.is_some_and(|q| q.contains("token=")) {
        let mut answer = Answer::page(StatusCode::SEE_OTHER, String::new());
        answer.headers.push(("location", "/dashboard".to_owned()));
        answer.headers.push((
            "set-cookie",
            format!(
                "{}={}; Path=/dashboard; HttpOnly; SameSite=Strict",
                dashboard::COOKIE,
                dashboard.token
            ),
        ));
        return answer;
    }
    Answer::page(StatusCode::OK, dashboard::render(&(dashboard.view)()))
}

/// The answer to `asked` (the pure part of the listener).
pub fn respond(asked: &Asked<'_>, endpoints: &Endpoints) -> Answer {
    let (method, path) = (asked.method, asked.path);
    if method != Method::GET && method != Method::HEAD {
        return Answer::text(StatusCode::METHOD_NOT_ALLOWED, "only GET is served here\n");
    }
    match path {
        "/metrics" => {
            (endpoints.refresh)(&endpoints.metrics);
            Answer {
                status: StatusCode::OK,
                content_type: METRICS_CONTENT_TYPE,
                body: endpoints.metrics.render(),
                headers: Vec::new(),
            }
        }
        // The process answers: that is all liveness means (a restart would not fix a
        // platform that is down, so readiness carries those).
        "/healthz" => Answer::text(StatusCode::OK, "ok\n"),
        "/readyz" => {
            let checks = (endpoints.ready)();
            let status = if health::all_ok(&checks) {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            Answer::text(status, health::render(&checks))
        }
        "/dashboard" if endpoints.dashboard.is_some() => match &endpoints.dashboard {
            Some(page) => dashboard(asked, page),
            None => Answer::text(StatusCode::NOT_FOUND, "not found\n"),
        },
        _ => Answer::text(
            StatusCode::NOT_FOUND,
            "not found; this listener serves /metrics, /healthz and /readyz\n",
        ),
    }
}

/// Binds `addr` and serves until the returned [`Listener`] is dropped.
pub async fn start(addr: SocketAddr, endpoints: Endpoints) -> Result<Listener, ListenerError> {
    let tcp = TcpListener::bind(addr)
        .await
        .map_err(|source| ListenerError::Bind { addr, source })?;
    let bound = tcp
        .local_addr()
        .map_err(|source| ListenerError::Bind { addr, source })?;
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let task = tokio::spawn(async move {
        loop {
            let Ok(permit) = slots.clone().acquire_owned().await else {
                return;
            };
            let Ok((stream, _)) = tcp.accept().await else {
                // Out of descriptors or similar: the next accept may succeed.
                tokio::task::yield_now().await;
                continue;
            };
            let endpoints = endpoints.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                    let cookies = request
                        .headers()
                        .get(hyper::header::COOKIE)
                        .and_then(|v| v.to_str().ok());
                    let asked = Asked {
                        method: request.method(),
                        path: request.uri().path(),
                        query: request.uri().query(),
                        cookies,
                    };
                    let answer = respond(&asked, &endpoints);
                    let head = request.method() == Method::HEAD;
                    async move {
                        let body = if head { String::new() } else { answer.body };
                        let mut response = Response::builder()
                            .status(answer.status)
                            .header("content-type", answer.content_type)
                            .header("cache-control", "no-store");
                        for (name, value) in answer.headers {
                            response = response.header(name, value);
                        }
                        response.body(Full::new(Bytes::from(body)))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_TIMEOUT)
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                drop(permit);
            });
        }
    });
    Ok(Listener { addr: bound, task })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoints(ready: bool) -> Endpoints {
        Endpoints {
            metrics: Arc::new(Metrics::new(["telegram"])),
            refresh: Arc::new(|metrics: &Metrics| metrics.set_sessions(1, 2, 3)),
            ready: Arc::new(move || {
                vec![if ready {
                    Check::ready("bot telegram", "running")
                } else {
                    Check::not_ready("bot telegram", "not connected yet")
                }]
            }),
            dashboard: Some(Dashboard {
                token: "t0ken".into(),
                view: Arc::new(View::default),
            }),
        }
    }

    fn get<'a>(path: &'a str, query: Option<&'a str>, cookies: Option<&'a str>) -> Asked<'a> {
        Asked {
            method: &Method::GET,
            path,
            query,
            cookies,
        }
    }

    fn respond_get(path: &str, e: &Endpoints) -> Answer {
        respond(&get(path, None, None), e)
    }

    #[test]
    fn the_dashboard_needs_its_token_and_moves_it_out_of_the_address() {
        let e = endpoints(true);
        assert_eq!(
            respond_get("/dashboard", &e).status,
            StatusCode::UNAUTHORIZED
        );
        let wrong = respond(&get("/dashboard", Some("token=t0keN"), None), &e);
        assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
        let linked = respond(&get("/dashboard", Some("token=t0ken"), None), &e);
        assert_eq!(linked.status, StatusCode::SEE_OTHER);
        assert!(
            linked
                .headers
                .contains(&("location", "/dashboard".to_owned()))
        );
        let page = respond(
            &get("/dashboard", None, Some("botconnect_dashboard=t0ken")),
            &e,
        );
        assert_eq!(page.status, StatusCode::OK);
        assert!(!page.body.contains("t0ken"), "{}", page.body);
        let mut none = e.clone();
        none.dashboard = None;
        assert_eq!(
            respond_get("/dashboard", &none).status,
            StatusCode::NOT_FOUND
        );
    }

    #[test]
    fn metrics_are_refreshed_at_each_scrape() {
        let answer = respond_get("/metrics", &endpoints(true));
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.content_type, METRICS_CONTENT_TYPE);
        assert!(
            answer
                .body
                .contains("botconnect_sessions{state=\"idle\"} 2"),
            "{}",
            answer.body
        );
        assert!(
            answer
                .body
                .contains("botconnect_sessions{state=\"hibernated\"} 3"),
            "{}",
            answer.body
        );
    }

    #[test]
    fn readiness_is_503_while_a_check_fails_and_liveness_stays_200() {
        let answer = respond_get("/readyz", &endpoints(false));
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            answer
                .body
                .contains("bot telegram: NOT READY: not connected yet"),
            "{}",
            answer.body
        );
        assert_eq!(
            respond_get("/healthz", &endpoints(false)).status,
            StatusCode::OK
        );
        assert_eq!(
            respond_get("/readyz", &endpoints(true)).status,
            StatusCode::OK
        );
    }

    #[test]
    fn nothing_but_get_of_the_three_paths_is_served() {
        let e = endpoints(true);
        assert_eq!(
            respond(
                &Asked {
                    method: &Method::POST,
                    ..get("/metrics", None, None)
                },
                &e
            )
            .status,
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(respond_get("/", &e).status, StatusCode::NOT_FOUND);
        assert_eq!(
            respond_get("/metrics/../state", &e).status,
            StatusCode::NOT_FOUND
        );
    }

    #[tokio::test]
    async fn the_listener_answers_over_http_on_loopback() {
        let listener = start("127.0.0.1:0".parse().unwrap(), endpoints(true))
            .await
            .expect("binds");
        let mut stream = tokio::net::TcpStream::connect(listener.addr())
            .await
            .expect("connects");
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut reply = String::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut reply))
            .await
            .expect("answers in time")
            .unwrap();
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        assert!(reply.ends_with("ok\n"), "{reply}");
    }
}
