//! The web console (docs/CONSOLE.md): one page, its script and style sheet compiled into
//! the binary, and a JSON API under /api/ that answers by asking the cluster over the
//! Kafka protocol, as Kafka UI or AKHQ do. It is a client of its own broker (how, and as
//! whom: strand_broker::console_access), so any node shows the whole cluster, and it
//! reuses the CLI's client code: `strand topic describe` and the console's topic page
//! read the same.
//!
//! When the broker has no PLAINTEXT listener, people sign in (HTTP Basic) with their
//! Kafka username and password; each one's client is kept (at most `SIGNED_IN_MAX`, each
//! until `SIGNED_IN_IDLE` unused) under a digest of the password it logged in with.
//!
//! Served on the broker's HTTP listener (strand_broker::http), under its bounds; a
//! request body is at most `BODY_MAX_BYTES`, and each answer waits at most the client's
//! request timeout per Kafka request.

mod api;
mod browse;
pub mod sampler;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{
    HeaderValue, AUTHORIZATION, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE,
    WWW_AUTHENTICATE, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use hyper::{Method, Request, Response, StatusCode};
use tokio::sync::watch;

use crate::cli::client::{plain_connector, Client, Connector, KafkaError};
use sampler::Samples;
use strand_broker::cluster::inter_broker::InterBrokerSecurity;
use strand_broker::console_access::{ConsoleAccess, LoginAccess};

const BODY_MAX_BYTES: usize = 64 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const CLIENT_ID: &str = "strand-console";
const SIGNED_IN_MAX: usize = 32;
const SIGNED_IN_IDLE: Duration = Duration::from_secs(15 * 60);

const INDEX_HTML: &str = include_str!("assets/index.html");
const CONSOLE_JS: &str = include_str!("assets/console.js");
const CONSOLE_CSS: &str = include_str!("assets/console.css");

pub struct Console {
    /// Where the console's own client (its sampler; every request when no sign-in is
    /// needed) connects, and how.
    bootstrap: String,
    connector: Connector,
    /// Set when people sign in.
    login: Option<LoginAccess>,
    node_id: i32,
    read_only: bool,
    /// Connected on first use, and again after a connection fails.
    client: tokio::sync::Mutex<Option<Arc<Client>>>,
    /// username -> their client.
    signed_in: tokio::sync::Mutex<HashMap<String, SignedIn>>,
    samples: std::sync::Mutex<Samples>,
}

struct SignedIn {
    password_digest: Vec<u8>,
    client: Arc<Client>,
    used: Instant,
}

/// Who a request acts as: the console's own client, or a signed-in person's.
enum Acting {
    Console,
    User(String),
}

impl Console {
    /// A console for the broker `node_id`, reaching it as `access` says; samples the
    /// cluster until `stopping` turns true.
    pub fn start(
        access: ConsoleAccess,
        node_id: i32,
        read_only: bool,
        mut stopping: watch::Receiver<bool>,
    ) -> anyhow::Result<Arc<Console>> {
        let (bootstrap, connector, login) = match access {
            ConsoleAccess::Open(address) => (address.to_string(), plain_connector(CLIENT_ID), None),
            ConsoleAccess::Login(login) => {
                let (address, security) = login.service().map_err(anyhow::Error::msg)?;
                (
                    address.to_string(),
                    secured_connector(security),
                    Some(*login),
                )
            }
        };
        let console = Arc::new(Console {
            bootstrap,
            connector,
            login,
            node_id,
            read_only,
            client: tokio::sync::Mutex::new(None),
            signed_in: tokio::sync::Mutex::default(),
            samples: std::sync::Mutex::default(),
        });
        let sampling = console.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(sampler::SAMPLE_INTERVAL);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = ticks.tick() => {}
                    _ = stopping.changed() => return,
                }
                let sampled = async {
                    let client = sampling.client().await?;
                    let sampled = sampler::sample(&client, &sampling.samples).await;
                    sampling.forget_on_failure(&Acting::Console, sampled).await
                };
                if let Err(error) = sampled.await {
                    tracing::debug!(%error, "console: sampling the cluster failed");
                }
            }
        });
        Ok(console)
    }

    async fn client(&self) -> anyhow::Result<Arc<Client>> {
        let mut client = self.client.lock().await;
        if let Some(client) = client.as_ref() {
            return Ok(client.clone());
        }
        let connected = connect(&self.bootstrap, self.connector.clone()).await?;
        *client = Some(connected.clone());
        Ok(connected)
    }

    /// Drops a client after an error that is not Kafka's answer (a closed connection,
    /// a timeout), so the next request connects again.
    async fn forget_on_failure<T>(
        &self,
        acting: &Acting,
        result: anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        if let Err(error) = &result {
            if KafkaError::code_of(error).is_none() {
                match acting {
                    Acting::Console => *self.client.lock().await = None,
                    Acting::User(name) => {
                        self.signed_in.lock().await.remove(name);
                    }
                }
            }
        }
        result
    }

    /// Who `request` acts as, and their client; or the answer that asks them to sign in.
    async fn sign_in(
        &self,
        request: &Request<Incoming>,
    ) -> Result<(Acting, Arc<Client>), Response<Full<Bytes>>> {
        let Some(login) = &self.login else {
            return match self.client().await {
                Ok(client) => Ok((Acting::Console, client)),
                Err(error) => Err(unreachable_broker(&error)),
            };
        };
        let Some((username, password)) = basic_credentials(request) else {
            return Err(sign_in_needed(
                "sign in with your Kafka username and password",
            ));
        };
        let digest = ring::digest::digest(&ring::digest::SHA256, password.as_bytes())
            .as_ref()
            .to_vec();
        {
            let mut signed_in = self.signed_in.lock().await;
            signed_in.retain(|_, s| s.used.elapsed() < SIGNED_IN_IDLE);
            if let Some(known) = signed_in.get_mut(&username) {
                if known.password_digest == digest {
                    known.used = Instant::now();
                    return Ok((Acting::User(username), known.client.clone()));
                }
            }
        }
        // Logging in is left unlocked: a slow or failing sign-in holds up no one else.
        let mut refusals = Vec::new();
        for mechanism in &login.mechanisms {
            let security = match login.as_user(mechanism, &username, &password) {
                Ok(security) => security,
                Err(error) => return Err(unreachable_broker(&anyhow::anyhow!(error))),
            };
            match connect(&login.address().to_string(), secured_connector(security)).await {
                Ok(client) => {
                    let mut signed_in = self.signed_in.lock().await;
                    let oldest = signed_in
                        .iter()
                        .min_by_key(|(_, s)| s.used)
                        .map(|(name, _)| name.clone());
                    if let Some(oldest) = oldest.filter(|_| signed_in.len() >= SIGNED_IN_MAX) {
                        signed_in.remove(&oldest);
                    }
                    signed_in.insert(
                        username.clone(),
                        SignedIn {
                            password_digest: digest,
                            client: client.clone(),
                            used: Instant::now(),
                        },
                    );
                    return Ok((Acting::User(username), client));
                }
                Err(error) => refusals.push(format!("{mechanism}: {error:#}")),
            }
        }
        tracing::info!(user = %username, why = %refusals.join("; "), "console: sign-in refused");
        Err(sign_in_needed(&format!(
            "signing in as {username} failed ({})",
            refusals.join("; ")
        )))
    }

    async fn route(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let method = request.method().clone();
        let path = request.uri().path().to_string();
        let query: HashMap<String, String> = request
            .uri()
            .query()
            .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
            .unwrap_or_default();
        // The page asks for the sign-in first, so the browser sends it with every call.
        if self.login.is_some() && basic_credentials(&request).is_none() {
            return sign_in_needed("sign in with your Kafka username and password");
        }
        match (&method, path.as_str()) {
            (&Method::GET | &Method::HEAD, "/" | "/index.html") => {
                asset(INDEX_HTML, "text/html; charset=utf-8")
            }
            (&Method::GET | &Method::HEAD, "/console.js") => {
                asset(CONSOLE_JS, "text/javascript; charset=utf-8")
            }
            (&Method::GET | &Method::HEAD, "/console.css") => {
                asset(CONSOLE_CSS, "text/css; charset=utf-8")
            }
            (_, api) if api.starts_with("/api/") => {
                let segments: Vec<String> = api["/api/".len()..]
                    .split('/')
                    .map(|s| {
                        percent_encoding::percent_decode_str(s)
                            .decode_utf8_lossy()
                            .into_owned()
                    })
                    .collect();
                let (acting, client) = match self.sign_in(&request).await {
                    Ok(signed_in) => signed_in,
                    Err(response) => return response,
                };
                let body = match read_body(&method, request).await {
                    Ok(body) => body,
                    Err(response) => return response,
                };
                let answered = api::answer(self, &client, &method, &segments, &query, body).await;
                match self.forget_on_failure(&acting, answered).await {
                    Ok((status, value)) => json(status, &value),
                    Err(error) => {
                        let status = KafkaError::code_of(&error)
                            .map_or(StatusCode::BAD_GATEWAY, status_of_kafka_error);
                        json(
                            status,
                            &serde_json::json!({ "error": format!("{error:#}") }),
                        )
                    }
                }
            }
            _ => json(
                StatusCode::NOT_FOUND,
                &serde_json::json!({ "error": format!("no page at {path}") }),
            ),
        }
    }
}

impl strand_broker::http::Console for Console {
    fn answer(
        &self,
        request: Request<Incoming>,
    ) -> Pin<Box<dyn Future<Output = Response<Full<Bytes>>> + Send + '_>> {
        Box::pin(self.route(request))
    }
}

/// A request's JSON body (changes only): Content-Type application/json required, as a
/// cross-site form cannot send it, and at most `BODY_MAX_BYTES`.
async fn read_body(
    method: &Method,
    request: Request<Incoming>,
) -> Result<Option<serde_json::Value>, Response<Full<Bytes>>> {
    if method == Method::GET || method == Method::HEAD {
        return Ok(None);
    }
    let refuse = |status: StatusCode, why: &str| json(status, &serde_json::json!({ "error": why }));
    let is_json = request
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !is_json {
        return Err(refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "changes must be sent as Content-Type: application/json",
        ));
    }
    let bytes = match Limited::new(request.into_body(), BODY_MAX_BYTES)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return Err(refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the request body is over 64 KiB",
            ))
        }
    };
    if bytes.is_empty() {
        return Ok(Some(serde_json::Value::Null));
    }
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|error| refuse(StatusCode::BAD_REQUEST, &format!("not JSON: {error}")))
}

async fn connect(bootstrap: &str, connector: Connector) -> anyhow::Result<Arc<Client>> {
    let connected =
        tokio::time::timeout(CONNECT_TIMEOUT, Client::connect_via(bootstrap, connector))
            .await
            .map_err(|_| anyhow::anyhow!("connecting to {bootstrap} timed out"))??;
    Ok(Arc::new(connected))
}

/// Connections opened with TLS and SASL as `security` says.
fn secured_connector(security: InterBrokerSecurity) -> Connector {
    let security = Arc::new(security);
    Arc::new(move |address: String| {
        let security = security.clone();
        Box::pin(async move { security.connect(&address, 8, CLIENT_ID).await })
    })
}

/// The username and password of an `Authorization: Basic` header.
fn basic_credentials(request: &Request<Incoming>) -> Option<(String, String)> {
    let value = request.headers().get(AUTHORIZATION)?.to_str().ok()?;
    let encoded = value
        .strip_prefix("Basic ")
        .or_else(|| value.strip_prefix("basic "))?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let (username, password) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
    Some((username.to_string(), password.to_string()))
}

fn sign_in_needed(why: &str) -> Response<Full<Bytes>> {
    let mut response = json(
        StatusCode::UNAUTHORIZED,
        &serde_json::json!({ "error": why }),
    );
    response.headers_mut().insert(
        WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"strand\", charset=\"UTF-8\""),
    );
    response
}

fn unreachable_broker(error: &anyhow::Error) -> Response<Full<Bytes>> {
    json(
        StatusCode::BAD_GATEWAY,
        &serde_json::json!({ "error": format!("the console cannot reach its broker: {error:#}") }),
    )
}

/// The HTTP status of an answer that is Kafka's error.
fn status_of_kafka_error(code: i16) -> StatusCode {
    match code {
        // UNKNOWN_TOPIC_OR_PARTITION, GROUP_ID_NOT_FOUND
        3 | 69 => StatusCode::NOT_FOUND,
        // TOPIC_ALREADY_EXISTS
        36 => StatusCode::CONFLICT,
        // TOPIC_, GROUP_ and CLUSTER_AUTHORIZATION_FAILED
        29..=31 => StatusCode::FORBIDDEN,
        _ => StatusCode::BAD_REQUEST,
    }
}

fn asset(body: &'static str, content_type: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    guarded(response)
}

/// Headers that keep the console to itself: its own script and styles only, never inside
/// another site's frame (where a click could be borrowed to delete a topic), and no
/// content-type guessing.
fn guarded(mut response: Response<Full<Bytes>>) -> Response<Full<Bytes>> {
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'",
        ),
    );
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

fn json(status: StatusCode, value: &serde_json::Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(value.to_string())));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    guarded(response)
}
