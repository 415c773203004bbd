//! The conformance scenarios (../../tests/conformance/scenarios.json) through this client,
//! against a real daemon started with auth on. The interpreter of the scenario language is
//! the Rust copy of tests/conformance/README.md's rules.

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use memoryd_client::{pb, Client, Config, Error, FILE_DESCRIPTOR_SET};
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, SerializeOptions};
use serde_json::{json, Value};

fn from_env(name: &str, fallback: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| fallback.to_string())
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn load() -> Value {
    let fallback = manifest_dir().join("../../tests/conformance/scenarios.json");
    let path = from_env("MEMORYD_CONFORMANCE_SCENARIOS", fallback.to_str().unwrap());
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {path} (set MEMORYD_CONFORMANCE_SCENARIOS?): {e}"));
    serde_json::from_str(&text).expect("scenarios.json is JSON")
}

fn pool() -> DescriptorPool {
    DescriptorPool::decode(FILE_DESCRIPTOR_SET).expect("the committed descriptor set decodes")
}

#[test]
fn every_rpc_of_the_proto_has_a_scenario() {
    let doc = load();
    let covered: BTreeSet<String> = doc["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["steps"].as_array().unwrap().iter())
        .map(|st| st["rpc"].as_str().unwrap().to_string())
        .collect();
    let rpcs: BTreeSet<String> = pool()
        .services()
        .filter(|s| s.package_name() == "memoryd.v1")
        .flat_map(|s| {
            let service = s.name().to_string();
            s.methods()
                .map(move |m| format!("{service}.{}", m.name()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(!rpcs.is_empty(), "no RPCs in the descriptor set");
    let missing: Vec<_> = rpcs.difference(&covered).collect();
    assert!(
        missing.is_empty(),
        "RPCs without a conformance scenario: {missing:?}"
    );
    let unknown: Vec<_> = covered.difference(&rpcs).collect();
    assert!(
        unknown.is_empty(),
        "scenarios name RPCs the proto lacks: {unknown:?}"
    );
}

struct Daemon {
    child: Child,
    address: String,
    _data: PathBuf,
}

impl Daemon {
    /// Starts memoryd with auth on; returns once it serves (or, with `until_listening`, as
    /// soon as its port is bound while it still loads).
    fn start(token: &str) -> Daemon {
        Daemon::start_with(token, false, &[])
    }

    fn start_with(token: &str, until_listening: bool, env: &[(&str, String)]) -> Daemon {
        let python = from_env(
            "MEMORYD_PYTHON",
            manifest_dir()
                .join("../../.venv/bin/python")
                .to_str()
                .unwrap(),
        );
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let data =
            std::env::temp_dir().join(format!("memoryd-rust-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&data);
        std::fs::create_dir_all(&data).unwrap();
        let mut cmd = Command::new(&python);
        cmd.args([
            "-m",
            "memoryd",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(&data)
        .current_dir(manifest_dir().join("../.."))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        for (k, _) in std::env::vars() {
            if k.starts_with("MEMORYD_") {
                cmd.env_remove(k);
            }
        }
        cmd.env("MEMORYD_AUTH_TOKEN", token);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("running {python} (set MEMORYD_PYTHON?): {e}"));
        // The log goes to a file beside the data dir; its "listening on" line gives the port.
        let log_path = data.with_extension("log");
        let (port_tx, port_rx) = std::sync::mpsc::channel::<String>();
        let stderr = child.stderr.take().unwrap();
        let log_file = log_path.clone();
        std::thread::spawn(move || {
            use std::io::Write;
            let mut log = std::fs::File::create(log_file).unwrap();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = writeln!(log, "{line}");
                if let Some(rest) = line.split("(port ").nth(1) {
                    let port: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
                    let _ = port_tx.send(port);
                }
            }
        });
        if until_listening {
            let port = port_rx
                .recv_timeout(Duration::from_secs(180))
                .unwrap_or_else(|_| {
                    panic!("memoryd did not listen; its log: {}", log_path.display())
                });
            return Daemon {
                child,
                address: format!("127.0.0.1:{port}"),
                _data: data,
            };
        }
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let prefix = "memoryd serving on ";
        if !line.starts_with(prefix) {
            let _ = child.kill();
            panic!(
                "memoryd did not serve: {line:?}; its log: {}",
                log_path.display()
            );
        }
        Daemon {
            child,
            address: line[prefix.len()..].trim().to_string(),
            _data: data,
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        unsafe_sigterm(self.child.id());
        for _ in 0..300 {
            if let Ok(Some(status)) = self.child.try_wait() {
                let _ = std::fs::remove_dir_all(&self._data);
                if status.success() {
                    let _ = std::fs::remove_file(self._data.with_extension("log"));
                }
                assert!(
                    status.success() || std::thread::panicking(),
                    "memoryd exited with {status}"
                );
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
    }
}

fn unsafe_sigterm(pid: u32) {
    // No libc dependency: the kill(1) command sends SIGTERM.
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
}

fn parse<T: Message + Default>(name: &str, value: &Value) -> T {
    let desc = pool()
        .get_message_by_name(&format!("memoryd.v1.{name}"))
        .unwrap();
    let dynamic = DynamicMessage::deserialize(desc, value.clone())
        .unwrap_or_else(|e| panic!("bad {name} JSON {value}: {e}"));
    dynamic.transcode_to::<T>().unwrap()
}

fn to_json<T: Message>(name: &str, message: &T) -> Value {
    let desc = pool()
        .get_message_by_name(&format!("memoryd.v1.{name}"))
        .unwrap();
    let dynamic = DynamicMessage::decode(desc, message.encode_to_vec().as_slice()).unwrap();
    let options = SerializeOptions::new().skip_default_fields(false);
    dynamic
        .serialize_with_options(serde_json::value::Serializer, &options)
        .unwrap()
}

async fn unary(c: &Client, rpc: &str, req: &Value) -> Result<Value, Error> {
    Ok(match rpc {
        "MemoryService.Store" => {
            to_json("StoreResponse", &c.store(parse("StoreRequest", req)).await?)
        }
        "MemoryService.Recall" => to_json(
            "RecallResponse",
            &c.recall(parse("RecallRequest", req)).await?,
        ),
        "MemoryService.Forget" => to_json(
            "ForgetResponse",
            &c.forget(parse("ForgetRequest", req)).await?,
        ),
        "MemoryService.Update" => to_json(
            "UpdateResponse",
            &c.update(parse("UpdateRequest", req)).await?,
        ),
        "MemoryService.Get" => {
            let r: pb::GetRequest = parse("GetRequest", req);
            let memory = c.get(&r.agent_id, &r.id).await?;
            to_json(
                "GetResponse",
                &pb::GetResponse {
                    memory: Some(memory),
                },
            )
        }
        "MemoryService.List" => to_json("ListResponse", &c.list(parse("ListRequest", req)).await?),
        "MemoryService.Stats" => {
            let r: pb::StatsRequest = parse("StatsRequest", req);
            to_json("StatsResponse", &c.stats(&r.agent_id).await?)
        }
        "MemoryService.ListConflicts" => to_json(
            "ListConflictsResponse",
            &c.list_conflicts(parse("ListConflictsRequest", req)).await?,
        ),
        "MemoryService.Export" => {
            let mut export = c.export(parse("ExportRequest", req)).await?;
            let mut memories = vec![];
            while let Some(m) = export.next().await? {
                memories.push(to_json("Memory", &m));
            }
            json!({ "memories": memories })
        }
        "HookService.BuildContext" => to_json(
            "BuildContextResponse",
            &c.build_context(parse("BuildContextRequest", req)).await?,
        ),
        "HookService.Capture" => to_json(
            "CaptureResponse",
            &c.capture(parse("CaptureRequest", req)).await?,
        ),
        "ReviewService.Prepare" => to_json(
            "PrepareReviewResponse",
            &c.review_prepare(parse("PrepareReviewRequest", req)).await?,
        ),
        "ReviewService.Apply" => to_json(
            "ApplyReviewResponse",
            &c.review_apply(parse("ApplyReviewRequest", req)).await?,
        ),
        other => panic!("the Rust runner does not know {other}"),
    })
}

async fn streaming(c: &Client, rpc: &str, reqs: &[Value]) -> Result<Value, Error> {
    match rpc {
        "MemoryService.Import" => {
            let parsed: Vec<pb::ImportRequest> =
                reqs.iter().map(|r| parse("ImportRequest", r)).collect();
            let agent = parsed[0].agent_id.clone();
            let memories: Vec<pb::Memory> = parsed.into_iter().filter_map(|r| r.memory).collect();
            Ok(to_json(
                "ImportResponse",
                &c.import(&agent, tokio_stream::iter(memories)).await?,
            ))
        }
        "MemoryService.Stream" => {
            let mut session = c.stream();
            for r in reqs {
                if session.send(parse("StreamRequest", r)).await.is_err() {
                    break; // recv says why
                }
            }
            session.close_send();
            let mut responses = serde_json::Map::new();
            while let Some(resp) = session.recv().await? {
                responses.insert(resp.request_id.clone(), to_json("StreamResponse", &resp));
            }
            Ok(json!({ "responses": responses }))
        }
        other => panic!("the Rust runner does not know {other}"),
    }
}

fn substitute(value: &Value, vars: &HashMap<String, Value>) -> Value {
    match value {
        Value::String(s) => {
            let mut out = String::new();
            let mut rest = s.as_str();
            while let Some(start) = rest.find("${") {
                let end = rest[start..]
                    .find('}')
                    .map(|e| start + e)
                    .expect("unclosed ${");
                let name = &rest[start + 2..end];
                let v = vars
                    .get(name)
                    .unwrap_or_else(|| panic!("${{{name}}} was never saved"));
                out.push_str(&rest[..start]);
                out.push_str(&match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                });
                rest = &rest[end + 1..];
            }
            out.push_str(rest);
            Value::String(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(|v| substitute(v, vars)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), substitute(v, vars)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The value at `path`; Null when absent; an array when the path has `[*]`.
fn resolve(doc: &Value, path: &str) -> Value {
    let mut values = vec![doc.clone()];
    let mut wild = false;
    for part in path.split('.') {
        let (name, indexes) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        let mut next: Vec<Value> = values
            .iter()
            .map(|v| {
                if name.is_empty() {
                    v.clone()
                } else {
                    v.get(name).cloned().unwrap_or(Value::Null)
                }
            })
            .collect();
        for idx in indexes.split('[').filter(|s| !s.is_empty()) {
            let idx = idx.trim_end_matches(']');
            let mut expanded = vec![];
            for v in next {
                match (v, idx) {
                    (Value::Array(a), "*") => {
                        wild = true;
                        expanded.extend(a);
                    }
                    (Value::Array(a), i) => expanded.push(
                        a.get(i.parse::<usize>().expect("bad index"))
                            .cloned()
                            .unwrap_or(Value::Null),
                    ),
                    _ => expanded.push(Value::Null),
                }
            }
            next = expanded;
        }
        values = next;
    }
    if wild {
        Value::Array(values.into_iter().filter(|v| !v.is_null()).collect())
    } else {
        values.into_iter().next().unwrap()
    }
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Null => Some(0.0),
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn same(actual: &Value, expected: &Value) -> bool {
    match expected {
        Value::Null => actual.is_null(),
        Value::Bool(e) => actual.as_bool().unwrap_or(false) == *e,
        Value::Number(e) => {
            let e = e.as_f64().unwrap();
            number(actual).is_some_and(|a| (a - e).abs() <= 1e-6 + 1e-5 * e.abs())
        }
        Value::String(e) => match actual {
            Value::Null => e.is_empty(),
            Value::String(a) => a == e,
            _ => false,
        },
        Value::Array(e) => {
            let empty = vec![];
            let a = match actual {
                Value::Null => &empty,
                Value::Array(a) => a,
                _ => return false,
            };
            a.len() == e.len() && a.iter().zip(e).all(|(a, e)| same(a, e))
        }
        Value::Object(e) => {
            let empty = serde_json::Map::new();
            let a = match actual {
                Value::Null => &empty,
                Value::Object(a) => a,
                _ => return false,
            };
            a.len() == e.len()
                && e.iter()
                    .all(|(k, v)| same(a.get(k).unwrap_or(&Value::Null), v))
        }
    }
}

fn contains(actual: &Value, expected: &Value) -> bool {
    match (actual, expected) {
        (Value::String(a), Value::String(e)) => a.contains(e.as_str()),
        (Value::Array(a), e) => a.iter().any(|v| same(v, e)),
        _ => false,
    }
}

fn length(v: &Value) -> usize {
    match v {
        Value::Array(a) => a.len(),
        Value::Object(o) => o.len(),
        Value::String(s) => s.len(),
        _ => 0,
    }
}

/// None when `spec` holds on `result`, else what is wrong.
fn check(result: &Value, spec: &Value) -> Option<String> {
    let path = spec["path"].as_str().expect("a check needs a path");
    let actual = resolve(result, path);
    for (op, want) in spec.as_object().unwrap() {
        let ok = match op.as_str() {
            "path" => continue,
            "eq" => same(&actual, want),
            "ne" => !same(&actual, want),
            "len" => length(&actual) as f64 == want.as_f64().unwrap(),
            "contains" => contains(&actual, want),
            "excludes" => !contains(&actual, want),
            "gte" => number(&actual).unwrap_or(f64::NAN) >= want.as_f64().unwrap(),
            "lte" => number(&actual).unwrap_or(f64::NAN) <= want.as_f64().unwrap(),
            other => return Some(format!("unknown check operator {other}")),
        };
        if !ok {
            return Some(format!("{path} {op} {want} failed: got {actual}"));
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance() {
    let doc = load();
    let token = doc["auth_token"].as_str().unwrap().to_string();
    let daemon = Daemon::start(&token);
    let mut clients = HashMap::new();
    for (name, tok) in [
        ("default", Some(token.clone())),
        ("no_token", None),
        ("wrong_token", Some("wrong-token".to_string())),
    ] {
        let config = Config {
            token: tok,
            timeout: Duration::from_secs(30),
            ..Config::new(daemon.address.clone())
        };
        clients.insert(name, Client::connect(config).await.unwrap());
    }
    let mut failures = vec![];
    for scenario in doc["scenarios"].as_array().unwrap() {
        let name = scenario["name"].as_str().unwrap();
        if let Err(problem) = run_scenario(&clients, scenario).await {
            failures.push(format!("{name}: {problem}"));
        } else {
            eprintln!("scenario {name}: ok");
        }
    }
    assert!(
        failures.is_empty(),
        "failed scenarios:\n{}",
        failures.join("\n")
    );
}

async fn run_scenario(clients: &HashMap<&str, Client>, scenario: &Value) -> Result<(), String> {
    let mut vars: HashMap<String, Value> = HashMap::new();
    for (n, st) in scenario["steps"].as_array().unwrap().iter().enumerate() {
        let rpc = st["rpc"].as_str().unwrap();
        let where_ = format!("step {n} ({rpc})");
        let client = &clients[st["client"].as_str().unwrap_or("default")];
        let outcome = if let Some(reqs) = st.get("requests") {
            let reqs = substitute(reqs, &vars);
            tokio::time::timeout(
                Duration::from_secs(30),
                streaming(client, rpc, reqs.as_array().unwrap()),
            )
            .await
            .map_err(|_| format!("{where_}: no answer within 30 s"))?
        } else {
            unary(client, rpc, &substitute(&st["request"], &vars)).await
        };
        let want = st["code"].as_str().unwrap_or("OK");
        let (got, message, result) = match outcome {
            Ok(v) => ("OK", String::new(), v),
            Err(e) => (e.code_name(), e.message.clone(), Value::Null),
        };
        if got != want {
            return Err(format!("{where_}: expected {want}, got {got}: {message}"));
        }
        if let Some(part) = st["message_contains"].as_str() {
            if !message.to_lowercase().contains(&part.to_lowercase()) {
                return Err(format!("{where_}: message {message:?} lacks {part:?}"));
            }
        }
        for spec in st["checks"].as_array().into_iter().flatten() {
            if let Some(problem) = check(&result, &substitute(spec, &vars)) {
                return Err(format!("{where_}: {problem}\n{result}"));
            }
        }
        for (name, path) in st["save"].as_object().into_iter().flatten() {
            let v = resolve(&result, path.as_str().unwrap());
            if v.is_null() || v == json!("") {
                return Err(format!("{where_}: nothing at {path} to save as {name}"));
            }
            vars.insert(name.clone(), v);
        }
    }
    Ok(())
}

/// While memoryd loads it answers UNAVAILABLE: a call that may not be retried fails with
/// it, an idempotent one rides it out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_outlast_a_daemon_that_is_starting() {
    let daemon = Daemon::start_with("startup-token-for-the-tests", true, &[]);
    let impatient = Client::connect(Config {
        retries: 0,
        ..Config::new(daemon.address.clone()).token("startup-token-for-the-tests")
    })
    .await
    .unwrap();
    let early = pb::StoreRequest {
        agent_id: "boot".into(),
        text: "written during start-up".into(),
        ..Default::default()
    };
    let err = impatient
        .store(early)
        .await
        .expect_err("a Store while the daemon loads");
    assert_eq!(err.code_name(), "UNAVAILABLE", "{err}");

    let patient = Client::connect(Config {
        retries: 1000,
        max_backoff: Duration::from_millis(500),
        timeout: Duration::from_secs(120),
        ..Config::new(daemon.address.clone()).token("startup-token-for-the-tests")
    })
    .await
    .unwrap();
    let stats = patient.stats("boot").await.expect("Stats with retries");
    assert_eq!(stats.total, 0, "the Store during start-up wrote nothing");
}

/// With nothing listening at all, the deadline bounds the retries.
#[tokio::test]
async fn the_deadline_bounds_retries() {
    let client = Client::connect(Config {
        retries: 1000,
        timeout: Duration::from_millis(700),
        ..Config::new("127.0.0.1:1")
    })
    .await
    .unwrap();
    let start = std::time::Instant::now();
    let err = client
        .stats("main")
        .await
        .expect_err("nothing listens on port 1");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );
    assert!(
        ["UNAVAILABLE", "DEADLINE_EXCEEDED"].contains(&err.code_name()),
        "{err}"
    );
}

/// A daemon serving TLS (the test certificate of tests/conformance/tls): a client trusting
/// the test CA gets answers; a plaintext client gets none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls() {
    let dir = manifest_dir().join("../../tests/conformance/tls");
    let file = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let daemon = Daemon::start_with(
        "tls-token-for-the-tests",
        false,
        &[
            ("MEMORYD_SERVER__TLS_CERT", file("server.crt")),
            ("MEMORYD_SERVER__TLS_KEY", file("server.key")),
        ],
    );
    let secure = Client::connect(Config {
        tls: true,
        tls_ca_pem: Some(std::fs::read(dir.join("ca.crt")).unwrap()),
        ..Config::new(daemon.address.clone()).token("tls-token-for-the-tests")
    })
    .await
    .unwrap();
    let stats = secure.stats("tls").await.expect("Stats over TLS");
    assert_eq!(stats.embedding_dim, 384);

    let plain = Client::connect(Config {
        retries: 0,
        timeout: Duration::from_secs(5),
        ..Config::new(daemon.address.clone()).token("tls-token-for-the-tests")
    })
    .await
    .unwrap();
    assert!(
        plain.stats("tls").await.is_err(),
        "a plaintext client got an answer from a TLS daemon"
    );
}

/// An address where nothing listens (connections are refused), and the socket that keeps
/// it so: bound, never listening. Keep it alive while the address is in use: the tests
/// run on parallel threads, and a port released at once could be handed to a daemon
/// another test starts on port 0, which would then answer at the "refused" address.
fn closed_port() -> (tokio::net::TcpSocket, String) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let address = socket.local_addr().unwrap().to_string();
    (socket, address)
}

/// A fresh agent id whose first daemon is `first`.
fn agent_preferring(addresses: &[String], first: &str) -> String {
    (0..)
        .map(|n| format!("fleet-rust-{}-{n}", std::process::id()))
        .find(|agent| {
            addresses[memoryd_client::routing::rendezvous_order(addresses, agent)[0]] == first
        })
        .unwrap()
}

/// A fleet whose first daemon refuses connections: nothing was sent there, so a store and
/// an update (which is never sent twice once it may have reached a daemon) both go on to
/// the next daemon, and the refused one is skipped for `down_for`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_fails_over_from_a_refused_daemon() {
    let token = "fleet-token-for-the-tests";
    let daemon = Daemon::start(token);
    let (_held, refused) = closed_port();
    let fleet = vec![refused.clone(), daemon.address.clone()];
    let agent = agent_preferring(&fleet, &refused);
    let client = Client::connect(Config {
        down_for: Duration::from_secs(600),
        ..Config::fleet(fleet.clone()).token(token)
    })
    .await
    .unwrap();
    assert_eq!(client.daemons_for(&agent), fleet);
    let direct = Client::connect(Config::new(daemon.address.clone()).token(token))
        .await
        .unwrap();
    let stored = client
        .store(pb::StoreRequest {
            agent_id: agent.clone(),
            text: "The wifi password is on the fridge".into(),
            ..Default::default()
        })
        .await
        .expect("a store fails over")
        .memory
        .unwrap();
    assert_eq!(
        direct.get(&agent, &stored.id).await.unwrap().text,
        stored.text
    );

    let update = |c: Client, text: &str| {
        let req = pb::UpdateRequest {
            agent_id: agent.clone(),
            id: stored.id.clone(),
            text: Some(text.to_string()),
            ..Default::default()
        };
        async move { c.update(req).await }
    };
    // A fresh client (no down mark yet) sends the update to the refused daemon first.
    let fresh = Client::connect(Config::fleet(fleet.clone()).token(token))
        .await
        .unwrap();
    update(fresh, "The wifi password is in the drawer")
        .await
        .expect("a refused connection sent nothing: the update goes on");
    assert_eq!(
        direct.get(&agent, &stored.id).await.unwrap().text,
        "The wifi password is in the drawer"
    );
    // The client that failed over knows the refused daemon is down: it goes straight on.
    update(client.clone(), "The wifi password is under the router")
        .await
        .expect("the refused daemon is skipped");
    assert_eq!(
        direct.get(&agent, &stored.id).await.unwrap().text,
        "The wifi password is under the router"
    );
}
