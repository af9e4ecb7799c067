//! The web console (docs/CONSOLE.md): one page, its script and style sheet compiled into
//! the binary, and a JSON API under /api/ that answers by asking the cluster over the
//! Kafka protocol, as Kafka UI or AKHQ do. It is a client of its own broker's first
//! PLAINTEXT listener, so any node shows the whole cluster, and it reuses the CLI's
//! client code: `strand topic describe` and the console's topic page read the same.
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
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use tokio::sync::watch;

use crate::cli::client::{Client, KafkaError};
use sampler::Samples;

const BODY_MAX_BYTES: usize = 64 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

const INDEX_HTML: &str = include_str!("assets/index.html");
const CONSOLE_JS: &str = include_str!("assets/console.js");
const CONSOLE_CSS: &str = include_str!("assets/console.css");

pub struct Console {
    /// The broker's own Kafka listener.
    bootstrap: String,
    node_id: i32,
    read_only: bool,
    /// Connected on first use, and again after a connection fails.
    client: tokio::sync::Mutex<Option<Arc<Client>>>,
    samples: std::sync::Mutex<Samples>,
}

impl Console {
    /// A console for the broker `node_id` listening at `bootstrap`; samples the cluster
    /// until `stopping` turns true.
    pub fn start(
        bootstrap: String,
        node_id: i32,
        read_only: bool,
        mut stopping: watch::Receiver<bool>,
    ) -> Arc<Console> {
        let console = Arc::new(Console {
            bootstrap,
            node_id,
            read_only,
            client: tokio::sync::Mutex::new(None),
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
                    sampling
                        .forget_on_failure(sampler::sample(&client, &sampling.samples).await)
                        .await
                };
                if let Err(error) = sampled.await {
                    tracing::debug!(%error, "console: sampling the cluster failed");
                }
            }
        });
        console
    }

    async fn client(&self) -> anyhow::Result<Arc<Client>> {
        let mut client = self.client.lock().await;
        if let Some(client) = client.as_ref() {
            return Ok(client.clone());
        }
        let connected = tokio::time::timeout(CONNECT_TIMEOUT, Client::connect(&self.bootstrap))
            .await
            .map_err(|_| anyhow::anyhow!("connecting to {} timed out", self.bootstrap))??;
        let connected = Arc::new(connected);
        *client = Some(connected.clone());
        Ok(connected)
    }

    /// Drops the client after an error that is not Kafka's answer (a closed connection,
    /// a timeout), so the next request connects again.
    async fn forget_on_failure<T>(&self, result: anyhow::Result<T>) -> anyhow::Result<T> {
        if let Err(error) = &result {
            if KafkaError::code_of(error).is_none() {
                *self.client.lock().await = None;
            }
        }
        result
    }

    async fn route(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let method = request.method().clone();
        let path = request.uri().path().to_string();
        let query: HashMap<String, String> = request
            .uri()
            .query()
            .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
            .unwrap_or_default();
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
                let body = match read_body(&method, request).await {
                    Ok(body) => body,
                    Err(response) => return response,
                };
                let answered = api::answer(self, &method, &segments, &query, body).await;
                match self.forget_on_failure(answered).await {
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
    response
}

fn json(status: StatusCode, value: &serde_json::Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(value.to_string())));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
