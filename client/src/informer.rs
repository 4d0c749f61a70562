//! The worker's end of the informer stream: a connection to the informer-server (Unix
//! socket, or TCP with mutual TLS) and a typed remote watcher that yields kube-runtime's
//! watcher events, so kube-runtime's reflector stores (and anything written for
//! `kube::runtime::watcher`) consume it unchanged:
//!
//! - a fresh stream, and a stream after RESET: `Init`, `InitApply` per object, `InitDone`;
//! - then `Apply` (ADDED, MODIFIED) and `Delete` (DELETED, with the final state).
//!
//! On a disconnect it reconnects with backoff (800 ms doubling to 30 s, jittered, as the
//! reflector) and resumes from the last SYNCED or BOOKMARK version, so it receives only
//! what it missed, or a RESET when the server no longer holds that history.

use std::path::PathBuf;
use std::time::Duration;

use futures::Stream;
use hyper_util::rt::TokioIo;
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::{DefaultBackoff, Event};
use rkcm_proto::v1::informer_client::InformerClient;
use rkcm_proto::v1::{EventType, WatchEvent, WatchRequest};
use serde::de::DeserializeOwned;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::Streaming;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("informer address {0:?}: expected unix:///PATH or tcp://HOST:PORT")]
    Address(String),
    #[error("informer TLS: {0}")]
    Tls(String),
    #[error("informer-server: {0}")]
    Transport(#[from] tonic::transport::Error),
    #[error("informer-server answered {}: {}", .0.code(), .0.message())]
    Status(#[from] tonic::Status),
    #[error("cannot decode {kind} {name:?} from the informer stream: {error}")]
    Decode {
        kind: &'static str,
        name: String,
        error: serde_json::Error,
    },
}

/// Client certificate, key and CA (PEM) for a tcp:// informer-server.
#[derive(Clone, Debug)]
pub struct ClientTls {
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
    pub ca: Vec<u8>,
    /// The name the server's certificate is checked against (default: the host).
    pub domain: Option<String>,
}

/// A client of the informer-server at `address` (`unix:///path` or `tcp://host:port`).
/// The connection is made on first use and remade after failures.
pub fn connect(
    address: &str,
    tls: Option<ClientTls>,
) -> Result<InformerClient<Channel>, ClientError> {
    Ok(InformerClient::new(channel(address, tls)?).max_decoding_message_size(usize::MAX))
}

/// The channel under [`connect`], for the server's other services (health, reflection).
pub fn channel(address: &str, tls: Option<ClientTls>) -> Result<Channel, ClientError> {
    let channel = if let Some(path) = address.strip_prefix("unix://") {
        let path = PathBuf::from(path);
        // The URI is required by the API but unused: the connector dials the socket.
        Endpoint::from_static("http://informer.local").connect_with_connector_lazy(
            tower::service_fn(move |_| {
                let path = path.clone();
                async move {
                    Ok::<_, std::io::Error>(TokioIo::new(
                        tokio::net::UnixStream::connect(path).await?,
                    ))
                }
            }),
        )
    } else if let Some(addr) = address.strip_prefix("tcp://") {
        let tls = tls.ok_or_else(|| {
            ClientError::Tls(format!(
                "tcp://{addr} needs a client certificate, key and CA (mutual TLS)"
            ))
        })?;
        let host = addr
            .rsplit_once(':')
            .map_or(addr, |(h, _)| h)
            .trim_matches(['[', ']']);
        let config = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&tls.ca))
            .identity(Identity::from_pem(&tls.cert, &tls.key))
            .domain_name(tls.domain.clone().unwrap_or_else(|| host.to_string()));
        Endpoint::from_shared(format!("https://{addr}"))
            .map_err(|_| ClientError::Address(address.to_string()))?
            .tls_config(config)?
            .connect_lazy()
    } else {
        return Err(ClientError::Address(address.to_string()));
    };
    Ok(channel)
}

struct RemoteWatch<K> {
    client: InformerClient<Channel>,
    request: WatchRequest,
    /// The last SYNCED or BOOKMARK version: where a reconnect resumes.
    resume_from: Option<String>,
    stream: Option<Streaming<WatchEvent>>,
    /// Between Init and InitDone.
    initial: bool,
    backoff: DefaultBackoff,
    retry_in: Option<Duration>,
    decode: fn(&mut WatchEvent) -> Result<K, ClientError>,
}

/// An object as the stream delivered it: decoded, and the JSON it was decoded from (for a
/// cache that keeps the text rather than the typed object).
pub struct Encoded<K> {
    pub object: K,
    pub json: String,
}

/// A stream of watcher events of `request`'s resource, decoded as `K`, that never ends:
/// errors are yielded (and retried with backoff), as kube-runtime's watcher does.
pub fn watch<K>(
    client: InformerClient<Channel>,
    request: WatchRequest,
) -> impl Stream<Item = Result<Event<K>, ClientError>> + Send
where
    K: DeserializeOwned + Send + 'static,
{
    remote(client, request, |event| decode::<K>(event))
}

/// [`watch`], with each object's JSON beside it.
pub fn watch_encoded<K>(
    client: InformerClient<Channel>,
    request: WatchRequest,
) -> impl Stream<Item = Result<Event<Encoded<K>>, ClientError>> + Send
where
    K: DeserializeOwned + Send + 'static,
{
    remote(client, request, |event| {
        let object = decode::<K>(event)?;
        Ok(Encoded {
            object,
            json: std::mem::take(&mut event.object),
        })
    })
}

fn remote<K: Send + 'static>(
    client: InformerClient<Channel>,
    request: WatchRequest,
    decode: fn(&mut WatchEvent) -> Result<K, ClientError>,
) -> impl Stream<Item = Result<Event<K>, ClientError>> + Send {
    let state = RemoteWatch::<K> {
        client,
        resume_from: (!request.resume_from_resource_version.is_empty())
            .then(|| request.resume_from_resource_version.clone()),
        request,
        stream: None,
        initial: false,
        backoff: DefaultBackoff::default(),
        retry_in: None,
        decode,
    };
    futures::stream::unfold(state, |mut state| async move {
        let item = state.step().await;
        Some((item, state))
    })
}

impl<K> RemoteWatch<K> {
    fn disconnected(&mut self) {
        self.stream = None;
        if self.initial {
            // The snapshot was cut short: start over with a fresh one.
            self.resume_from = None;
            self.initial = false;
        }
        self.retry_in = Some(self.backoff.next().unwrap_or(Duration::from_secs(30)));
    }

    async fn step(&mut self) -> Result<Event<K>, ClientError> {
        loop {
            let Some(stream) = self.stream.as_mut() else {
                if let Some(delay) = self.retry_in.take() {
                    tokio::time::sleep(delay).await;
                }
                let mut request = self.request.clone();
                request.resume_from_resource_version = self.resume_from.clone().unwrap_or_default();
                match self.client.watch(request).await {
                    Ok(response) => {
                        self.stream = Some(response.into_inner());
                        if self.resume_from.is_none() {
                            self.initial = true;
                            return Ok(Event::Init);
                        }
                        continue;
                    }
                    Err(status) => {
                        self.disconnected();
                        return Err(status.into());
                    }
                }
            };
            let mut event = match stream.message().await {
                Ok(Some(event)) => event,
                Ok(None) => {
                    self.disconnected();
                    continue;
                }
                Err(status) => {
                    self.disconnected();
                    return Err(status.into());
                }
            };
            match event.r#type() {
                EventType::Added | EventType::Modified | EventType::Deleted => {
                    let object = (self.decode)(&mut event)?;
                    crate::memory::count_decoded();
                    return Ok(match (event.r#type(), self.initial) {
                        (EventType::Deleted, _) => Event::Delete(object),
                        (_, true) => Event::InitApply(object),
                        (_, false) => Event::Apply(object),
                    });
                }
                EventType::Synced => {
                    self.resume_from = Some(event.resource_version);
                    self.backoff.reset();
                    if self.initial {
                        self.initial = false;
                        return Ok(Event::InitDone);
                    }
                }
                EventType::Reset => {
                    self.initial = true;
                    return Ok(Event::Init);
                }
                EventType::Bookmark => self.resume_from = Some(event.resource_version),
                EventType::Unspecified => {}
            }
        }
    }
}

fn decode<K: DeserializeOwned>(event: &WatchEvent) -> Result<K, ClientError> {
    serde_json::from_str(&event.object).map_err(|error| ClientError::Decode {
        kind: std::any::type_name::<K>()
            .rsplit("::")
            .next()
            .unwrap_or("object"),
        name: if event.namespace.is_empty() {
            event.name.clone()
        } else {
            format!("{}/{}", event.namespace, event.name)
        },
        error,
    })
}
