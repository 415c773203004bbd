//! Rust client for memoryd, the long-term memory daemon for AI agents (tonic + prost).
//!
//! One [`Client`] serves the three services (MemoryService, HookService, ReviewService) over
//! one HTTP/2 connection. Requests and responses are the generated messages in [`pb`]. Every unary
//! call has a deadline (retries included); idempotent calls are retried while the daemon
//! starts or restarts (`UNAVAILABLE`); every failure is an [`Error`] carrying the gRPC code
//! and the daemon's message.
//!
//! ```no_run
//! # async fn demo() -> Result<(), memoryd_client::Error> {
//! use memoryd_client::{pb, Client, Config};
//! let client = Client::connect(Config::new("127.0.0.1:50051")).await?;
//! let stored = client
//!     .store(pb::StoreRequest { agent_id: "main".into(), text: "Deploys happen on Fridays".into(), ..Default::default() })
//!     .await?;
//! println!("{:?} {}", stored.outcome(), stored.memory.unwrap().id);
//! # Ok(()) }
//! ```
//!
//! `Config::addresses` (several daemons serving one store) routes each call by its agent
//! id and fails over to the agent's next daemon; [`routing`] states the rule.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Response, Status, Streaming};

pub mod routing;

use routing::{new_idempotency_key, Fleet};

/// The generated messages and stubs of package `memoryd.v1`.
#[allow(clippy::all, missing_docs)]
pub mod pb {
    include!("gen/memoryd.v1.rs");
}

/// The encoded FileDescriptorSet of `protos/` (for reflection or dynamic messages).
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!("gen/descriptor.binpb");

/// Where `memoryd serve` listens unless told otherwise.
pub const DEFAULT_ADDRESS: &str = "127.0.0.1:50051";

/// How to reach the daemon. `Config::default()` talks plaintext to [`DEFAULT_ADDRESS`].
#[derive(Clone, Debug)]
pub struct Config {
    /// `host:port`, or a full `http://` / `https://` URI.
    pub address: String,
    /// Several daemons serving one store (a fleet; `address` is then not used): each call
    /// goes to its agent's daemon and fails over ([`routing`]). Default empty.
    pub addresses: Vec<String>,
    /// Over a fleet: how long a daemon that failed is skipped. Default 2 s.
    pub down_for: Duration,
    /// Over a fleet: the longest wait for a connection to one daemon. Default 1 s.
    pub connect_timeout: Duration,
    /// Sent on every call as `authorization: Bearer <token>` (the daemon's MEMORYD_AUTH_TOKEN).
    pub token: Option<String>,
    /// Deadline of each unary call, retries included. Default 10 s.
    pub timeout: Duration,
    /// Retries of idempotent calls on UNAVAILABLE. Default 3.
    pub retries: u32,
    /// Upper bound of one wait between retries (100 ms, doubled each time, with jitter).
    /// Default 2 s.
    pub max_backoff: Duration,
    /// Connect with TLS (rustls; feature `tls`).
    pub tls: bool,
    /// PEM of a CA to trust for TLS (a private CA); None uses the TLS defaults.
    pub tls_ca_pem: Option<Vec<u8>>,
    /// Server name to verify for TLS, when it differs from the address's host.
    pub tls_domain: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            address: DEFAULT_ADDRESS.to_string(),
            addresses: Vec::new(),
            down_for: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(1),
            token: None,
            timeout: Duration::from_secs(10),
            retries: 3,
            max_backoff: Duration::from_secs(2),
            tls: false,
            tls_ca_pem: None,
            tls_domain: None,
        }
    }
}

impl Config {
    /// The defaults, for `address`.
    pub fn new(address: impl Into<String>) -> Self {
        Config {
            address: address.into(),
            ..Default::default()
        }
    }

    /// The defaults, for a fleet of daemons serving one store.
    pub fn fleet<S: Into<String>>(addresses: impl IntoIterator<Item = S>) -> Self {
        Config {
            addresses: addresses.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }

    /// The same config with a bearer token.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }
}

/// A failed call: the gRPC status code and the daemon's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The gRPC status code.
    pub code: Code,
    /// The daemon's message (what to fix, for INVALID_ARGUMENT).
    pub message: String,
}

impl Error {
    fn new(code: Code, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
        }
    }

    /// The canonical name of the code, e.g. `"INVALID_ARGUMENT"`.
    pub fn code_name(&self) -> &'static str {
        code_name(self.code)
    }
}

/// The canonical upper-case name of a gRPC code (`"NOT_FOUND"`).
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code_name(), self.message)
    }
}

impl std::error::Error for Error {}

impl From<Status> for Error {
    fn from(status: Status) -> Self {
        Error::new(status.code(), status.message())
    }
}

/// Adds the bearer token to every call.
#[derive(Clone)]
pub struct Auth(Option<MetadataValue<Ascii>>);

impl tonic::service::Interceptor for Auth {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

type Transport = InterceptedService<Channel, Auth>;
type MemoryStub = pb::memory_service_client::MemoryServiceClient<Transport>;
type HookStub = pb::hook_service_client::HookServiceClient<Transport>;
type ReviewStub = pb::review_service_client::ReviewServiceClient<Transport>;

/// One daemon: its address and the three stubs over its connection.
struct Stubs {
    address: String,
    memory: MemoryStub,
    hooks: HookStub,
    review: ReviewStub,
}

/// The client. Cheap to clone; clones share the connections.
#[derive(Clone)]
pub struct Client {
    endpoints: Arc<Vec<Stubs>>,
    fleet: Option<Arc<Fleet>>,
    timeout: Duration,
    retries: u32,
    max_backoff: Duration,
}

/// Whether `status` says no connection was made (refused, or none within the connect
/// timeout): the request was then not sent, and any call may go to another daemon.
fn never_connected(status: &Status) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    while let Some(error) = source {
        if error.downcast_ref::<tonic::ConnectError>().is_some() {
            return true;
        }
        source = error.source();
    }
    false
}

/// Between half and all of `wait`, so clients that lost the daemon together do not come
/// back in lockstep.
fn jitter(wait: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(wait.as_nanos() as u64);
    let fraction = (hasher.finish() % 1000) as f64 / 2000.0; // 0 .. 0.5
    wait.mul_f64(0.5 + fraction)
}

impl Client {
    /// Makes a client. The connection is opened by the first call (which retries while
    /// the daemon starts, for idempotent calls), so this succeeds with the daemon down.
    pub async fn connect(config: Config) -> Result<Client, Error> {
        let bad = |what: String| Error::new(Code::InvalidArgument, what);
        let addresses = if config.addresses.is_empty() {
            vec![config.address.clone()]
        } else {
            config.addresses.clone()
        };
        let fleet = if addresses.len() > 1 {
            Some(Arc::new(
                Fleet::new(addresses.clone(), config.down_for).map_err(bad)?,
            ))
        } else {
            None
        };
        let mut endpoints = Vec::with_capacity(addresses.len());
        for address in addresses {
            endpoints.push(Self::stubs(&config, address, fleet.is_some())?);
        }
        Ok(Client {
            endpoints: Arc::new(endpoints),
            fleet,
            timeout: config.timeout,
            retries: config.retries,
            max_backoff: config.max_backoff,
        })
    }

    /// The daemons that serve `agent_id`, first choice first.
    pub fn daemons_for(&self, agent_id: &str) -> Vec<String> {
        let addresses: Vec<&str> = self.endpoints.iter().map(|e| e.address.as_str()).collect();
        routing::rendezvous_order(&addresses, agent_id)
            .into_iter()
            .map(|i| addresses[i].to_string())
            .collect()
    }

    fn stubs(config: &Config, address: String, fleet: bool) -> Result<Stubs, Error> {
        let bad = |what: String| Error::new(Code::InvalidArgument, what);
        let uri = if address.contains("://") {
            address.clone()
        } else if config.tls {
            format!("https://{address}")
        } else {
            format!("http://{address}")
        };
        #[allow(unused_mut)]
        let mut endpoint =
            Endpoint::from_shared(uri.clone()).map_err(|e| bad(format!("address {uri:?}: {e}")))?;
        if fleet {
            endpoint = endpoint.connect_timeout(config.connect_timeout);
        }
        if config.tls || uri.starts_with("https://") {
            #[cfg(feature = "tls")]
            {
                let mut tls = tonic::transport::ClientTlsConfig::new().with_enabled_roots();
                if let Some(pem) = &config.tls_ca_pem {
                    tls = tls.ca_certificate(tonic::transport::Certificate::from_pem(pem));
                }
                if let Some(domain) = &config.tls_domain {
                    tls = tls.domain_name(domain.clone());
                }
                endpoint = endpoint
                    .tls_config(tls)
                    .map_err(|e| bad(format!("tls: {e}")))?;
            }
            #[cfg(not(feature = "tls"))]
            return Err(bad("TLS needs the crate feature `tls`".into()));
        }
        let token = match &config.token {
            Some(t) if !t.is_empty() => Some(
                format!("Bearer {t}")
                    .parse::<MetadataValue<Ascii>>()
                    .map_err(|_| bad("the token must be printable ASCII".into()))?,
            ),
            _ => None,
        };
        let channel = endpoint.connect_lazy();
        let auth = Auth(token);
        Ok(Stubs {
            address,
            memory: pb::memory_service_client::MemoryServiceClient::with_interceptor(
                channel.clone(),
                auth.clone(),
            ),
            hooks: pb::hook_service_client::HookServiceClient::with_interceptor(
                channel.clone(),
                auth.clone(),
            ),
            review: pb::review_service_client::ReviewServiceClient::with_interceptor(channel, auth),
        })
    }

    /// The daemon for a streaming call: the agent's first not marked down.
    fn pick(&self, agent_id: &str) -> &Stubs {
        let i = self.fleet.as_ref().map_or(0, |f| f.order(agent_id)[0]);
        &self.endpoints[i]
    }

    /// One unary call under the client's deadline; idempotent calls are retried on
    /// UNAVAILABLE with exponential backoff (100 ms doubled up to `max_backoff`, with
    /// jitter) while the deadline allows.
    ///
    /// Over a fleet each attempt goes to the agent's daemons in order; UNAVAILABLE moves
    /// on to the next only when `failover` (the call is safe to send again).
    async fn call<S, Req, Resp, F, Fut>(
        &self,
        stub: fn(&Stubs) -> &S,
        agent_id: &str,
        (idempotent, failover): (bool, bool),
        req: Req,
        rpc: F,
    ) -> Result<Resp, Error>
    where
        S: Clone,
        Req: Clone,
        F: Fn(S, Request<Req>) -> Fut,
        Fut: Future<Output = Result<Response<Resp>, Status>>,
    {
        let deadline = Instant::now() + self.timeout;
        let attempts = 1 + if idempotent { self.retries } else { 0 };
        let mut backoff = Duration::from_millis(100);
        let mut attempt = 1;
        let order = match &self.fleet {
            Some(fleet) => fleet.order(agent_id),
            None => vec![0],
        };
        loop {
            let mut outcome = Err(Error::new(Code::Unavailable, "no daemon"));
            for &i in &order {
                let left = deadline.saturating_duration_since(Instant::now());
                let mut request = Request::new(req.clone());
                request.set_timeout(left);
                let one = stub(&self.endpoints[i]).clone();
                let mut unsent = false;
                outcome = match tokio::time::timeout(left, rpc(one, request)).await {
                    Ok(result) => result.map_err(|status| {
                        unsent = never_connected(&status);
                        Error::from(status)
                    }),
                    Err(_) => Err(Error::new(Code::DeadlineExceeded, "deadline exceeded")),
                };
                let Some(fleet) = &self.fleet else { break };
                match &outcome {
                    Ok(_) => {
                        fleet.mark_up(i);
                        break;
                    }
                    Err(e) if e.code == Code::Unavailable => {
                        fleet.mark_down(i);
                        if !failover && !unsent {
                            break; // it may have reached the daemon: never sent again
                        }
                    }
                    Err(_) => break,
                }
            }
            match outcome {
                Ok(resp) => return Ok(resp.into_inner()),
                Err(e) if e.code == Code::Unavailable && attempt < attempts => {
                    let wait = jitter(backoff.min(self.max_backoff));
                    if Instant::now() + wait >= deadline {
                        return Err(e); // no time for another attempt: the real cause is more useful
                    }
                    tokio::time::sleep(wait).await;
                    backoff *= 2;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Store a memory. Retried only with an idempotency key (a retry cannot store twice);
    /// over a fleet it always has one (made here when the request has none).
    pub async fn store(&self, mut req: pb::StoreRequest) -> Result<pb::StoreResponse, Error> {
        if self.fleet.is_some() && req.idempotency_key.is_empty() {
            req.idempotency_key = new_idempotency_key();
        }
        let idempotent = !req.idempotency_key.is_empty();
        self.call(
            |e| &e.memory,
            &req.agent_id.clone(),
            (idempotent, idempotent),
            req,
            |mut c, r| async move { c.store(r).await },
        )
        .await
    }

    /// The memories most relevant to a query, best first.
    pub async fn recall(&self, req: pb::RecallRequest) -> Result<pb::RecallResponse, Error> {
        self.call(
            |e| &e.memory,
            &req.agent_id.clone(),
            (true, true),
            req,
            |mut c, r| async move { c.recall(r).await },
        )
        .await
    }

    /// Delete by id, or by query when exactly one match is strong.
    pub async fn forget(&self, req: pb::ForgetRequest) -> Result<pb::ForgetResponse, Error> {
        self.call(
            |e| &e.memory,
            &req.agent_id.clone(),
            (false, false),
            req,
            |mut c, r| async move { c.forget(r).await },
        )
        .await
    }

    /// Forget by id.
    pub async fn forget_id(&self, agent_id: &str, id: &str) -> Result<pb::ForgetResponse, Error> {
        let target = Some(pb::forget_request::Target::Id(id.to_string()));
        self.forget(pb::ForgetRequest {
            agent_id: agent_id.to_string(),
            target,
            ..Default::default()
        })
        .await
    }

    /// Forget by query.
    pub async fn forget_query(
        &self,
        agent_id: &str,
        query: &str,
    ) -> Result<pb::ForgetResponse, Error> {
        let target = Some(pb::forget_request::Target::Query(query.to_string()));
        self.forget(pb::ForgetRequest {
            agent_id: agent_id.to_string(),
            target,
            ..Default::default()
        })
        .await
    }

    /// Change a memory's text, importance, category, metadata or expiry.
    pub async fn update(&self, req: pb::UpdateRequest) -> Result<pb::UpdateResponse, Error> {
        self.call(
            |e| &e.memory,
            &req.agent_id.clone(),
            (false, false),
            req,
            |mut c, r| async move { c.update(r).await },
        )
        .await
    }

    /// One memory.
    pub async fn get(&self, agent_id: &str, id: &str) -> Result<pb::Memory, Error> {
        let req = pb::GetRequest {
            agent_id: agent_id.to_string(),
            id: id.to_string(),
            ..Default::default()
        };
        let resp = self
            .call(
                |e| &e.memory,
                agent_id,
                (true, true),
                req,
                |mut c, r| async move { c.get(r).await },
            )
            .await?;
        resp.memory
            .ok_or_else(|| Error::new(Code::Internal, "GetResponse without a memory"))
    }

    /// One page of memories, newest first unless `oldest_first`.
    pub async fn list(&self, req: pb::ListRequest) -> Result<pb::ListResponse, Error> {
        self.call(
            |e| &e.memory,
            &req.agent_id.clone(),
            (true, true),
            req,
            |mut c, r| async move { c.list(r).await },
        )
        .await
    }

    /// Counts of what an agent may read.
    pub async fn stats(&self, agent_id: &str) -> Result<pb::StatsResponse, Error> {
        self.stats_with(pb::StatsRequest {
            agent_id: agent_id.to_string(),
            ..Default::default()
        })
        .await
    }

    /// Stats with every request field, e.g. `daemon_wide` (needs an operator credential).
    pub async fn stats_with(&self, req: pb::StatsRequest) -> Result<pb::StatsResponse, Error> {
        self.call(
            |e| &e.memory,
            &req.agent_id.clone(),
            (true, true),
            req,
            |mut c, r| async move { c.stats(r).await },
        )
        .await
    }

    /// The conflict log entries the agent may read.
    pub async fn list_conflicts(
        &self,
        req: pb::ListConflictsRequest,
    ) -> Result<pb::ListConflictsResponse, Error> {
        self.call(
            |e| &e.memory,
            &req.agent_id.clone(),
            (true, true),
            req,
            |mut c, r| async move { c.list_conflicts(r).await },
        )
        .await
    }

    /// Review proposals (ReviewService.Prepare) over what the agent may read: near
    /// duplicates, conflicts, stale memories, promotions asked for. Changes nothing: retried.
    pub async fn review_prepare(
        &self,
        req: pb::PrepareReviewRequest,
    ) -> Result<pb::PrepareReviewResponse, Error> {
        self.call(
            |e| &e.review,
            &req.agent_id.clone(),
            (true, true),
            req,
            |mut c, r| async move { c.prepare(r).await },
        )
        .await
    }

    /// Applies approved review items (ReviewService.Apply), each re-validated and applied
    /// whole. Retried: a second Apply of the same items changes nothing (ALREADY_APPLIED).
    pub async fn review_apply(
        &self,
        req: pb::ApplyReviewRequest,
    ) -> Result<pb::ApplyReviewResponse, Error> {
        self.call(
            |e| &e.review,
            &req.agent_id.clone(),
            (true, true),
            req,
            |mut c, r| async move { c.apply(r).await },
        )
        .await
    }

    /// The before-prompt hook. Hooks have budgets of their own: never retried (over a
    /// fleet this read fails over to the agent's next daemon).
    pub async fn build_context(
        &self,
        req: pb::BuildContextRequest,
    ) -> Result<pb::BuildContextResponse, Error> {
        self.call(
            |e| &e.hooks,
            &req.agent_id.clone(),
            (false, true),
            req,
            |mut c, r| async move { c.build_context(r).await },
        )
        .await
    }

    /// The after-turn hook. Never retried; over a fleet it carries an idempotency key (made
    /// here when the request has none) and fails over without storing twice.
    pub async fn capture(&self, mut req: pb::CaptureRequest) -> Result<pb::CaptureResponse, Error> {
        if self.fleet.is_some() && req.idempotency_key.is_empty() {
            req.idempotency_key = new_idempotency_key();
        }
        let keyed = !req.idempotency_key.is_empty();
        self.call(
            |e| &e.hooks,
            &req.agent_id.clone(),
            (false, keyed),
            req,
            |mut c, r| async move { c.capture(r).await },
        )
        .await
    }

    /// Every memory the agent may read, streamed (no row cap, no deadline: bound it with
    /// `tokio::time::timeout` if needed).
    pub async fn export(&self, req: pb::ExportRequest) -> Result<Export, Error> {
        let mut stub = self.pick(&req.agent_id).memory.clone();
        let stream = stub.export(req).await?.into_inner();
        Ok(Export(stream))
    }

    /// Stream memories (e.g. from [`Client::export`]) into the daemon under `agent_id`; it
    /// re-embeds them. Refused memories are reported in the response, the others imported.
    pub async fn import<S>(&self, agent_id: &str, memories: S) -> Result<pb::ImportResponse, Error>
    where
        S: Stream<Item = pb::Memory> + Send + 'static,
    {
        let mut stub = self.pick(agent_id).memory.clone();
        let agent_id = agent_id.to_string();
        let requests = memories.map(move |m| pb::ImportRequest {
            agent_id: agent_id.clone(),
            memory: Some(m),
            ..Default::default()
        });
        Ok(stub.import(requests).await?.into_inner())
    }

    /// Open a Stream session: ops go in with [`Session::send`], answers (matched by
    /// `request_id`, in completion order) come out of [`Session::recv`]. A failing op is
    /// answered with an `error` result; the session goes on. Over a fleet it goes to agent
    /// `""`'s daemon; [`Client::stream_for`] chooses the agent.
    pub fn stream(&self) -> Session {
        self.stream_for("")
    }

    /// A Stream session on `agent_id`'s daemon (the agent whose ops it carries).
    pub fn stream_for(&self, agent_id: &str) -> Session {
        let (ops_tx, ops_rx) = mpsc::channel::<pb::StreamRequest>(64);
        let (out_tx, out_rx) = mpsc::channel::<Result<pb::StreamResponse, Error>>(64);
        let mut stub = self.pick(agent_id).memory.clone();
        let task = tokio::spawn(async move {
            let mut inbound = match stub.stream(ReceiverStream::new(ops_rx)).await {
                Ok(resp) => resp.into_inner(),
                Err(status) => {
                    let _ = out_tx.send(Err(status.into())).await;
                    return;
                }
            };
            loop {
                let item = match inbound.message().await {
                    Ok(Some(m)) => Ok(m),
                    Ok(None) => return,
                    Err(status) => Err(Error::from(status)),
                };
                let failed = item.is_err();
                if out_tx.send(item).await.is_err() || failed {
                    return;
                }
            }
        });
        Session {
            ops: Some(ops_tx),
            answers: out_rx,
            task,
        }
    }
}

/// The memories of an Export, in order.
pub struct Export(Streaming<pb::Memory>);

impl Export {
    /// The next memory, `Ok(None)` at the end.
    pub async fn next(&mut self) -> Result<Option<pb::Memory>, Error> {
        Ok(self.0.message().await?)
    }
}

/// One Stream session (see [`Client::stream`]). Dropping it ends the session.
pub struct Session {
    ops: Option<mpsc::Sender<pb::StreamRequest>>,
    answers: mpsc::Receiver<Result<pb::StreamResponse, Error>>,
    task: tokio::task::JoinHandle<()>,
}

impl Session {
    /// Queue one op (waits while 64 are queued: backpressure).
    pub async fn send(&mut self, op: pb::StreamRequest) -> Result<(), Error> {
        let closed = || {
            Error::new(
                Code::FailedPrecondition,
                "the session is closed for sending",
            )
        };
        let ops = self.ops.as_ref().ok_or_else(closed)?;
        // If the call has ended, recv() says why.
        ops.send(op)
            .await
            .map_err(|_| Error::new(Code::Cancelled, "the session has ended"))
    }

    /// No more ops: `recv` returns `Ok(None)` after the last answer.
    pub fn close_send(&mut self) {
        self.ops = None;
    }

    /// The next answer; `Ok(None)` once the session is over; `Err` if the call failed.
    pub async fn recv(&mut self) -> Result<Option<pb::StreamResponse>, Error> {
        self.answers.recv().await.transpose()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.task.abort();
    }
}
