//! Routing over a fleet of daemons (`Config::addresses`): which daemon serves an agent, and
//! when to try another.
//!
//! Agent affinity is rendezvous (highest random weight) hashing, the same rule in every
//! memoryd client (Python, TypeScript, Go, Rust, Java; checked against
//! `tests/data/routing_vectors.json`), so a host mixing languages sends one agent to one
//! daemon and that daemon's caches stay warm:
//!
//! - an address is taken as given, without a leading `http://` or `https://` and a
//!   trailing `/`;
//! - its weight for an agent is the first 8 bytes of
//!   `SHA-256(address UTF-8 || 0x00 || agent_id UTF-8)`, a big-endian unsigned 64-bit integer;
//! - the agent's order is every address by weight, highest first (ties: the smaller address
//!   first, by bytes).
//!
//! What fails over: a daemon that could not be connected to (refused, or no connection
//! within `connect_timeout`; tonic's `ConnectError`): nothing was sent, so every call moves
//! on; `UNAVAILABLE` answered to a call safe to send again: reads, and `store` and
//! `capture`, which over a fleet always carry an idempotency key (made by the client when
//! there is none). `update` and `forget` are then returned as they are (they may have
//! reached the daemon), as is every other error (`INVALID_ARGUMENT`, `NOT_FOUND`,
//! `PERMISSION_DENIED`, ...). A daemon that failed is skipped for `down_for`, then tried
//! again.

use std::sync::Mutex;
use std::time::Duration;

use ring::digest;
use ring::rand::{SecureRandom, SystemRandom};
use tokio::time::Instant;

/// The address as hashed: without an `http://` or `https://` prefix or a trailing `/`.
pub fn normal_address(address: &str) -> &str {
    let mut rest = address;
    for scheme in ["http://", "https://"] {
        if rest.len() >= scheme.len() && rest[..scheme.len()].eq_ignore_ascii_case(scheme) {
            rest = &rest[scheme.len()..];
            break;
        }
    }
    rest.trim_end_matches('/')
}

/// The 8-byte rendezvous weight of `address` for `agent_id` (compare as bytes).
pub fn weight(address: &str, agent_id: &str) -> [u8; 8] {
    let mut ctx = digest::Context::new(&digest::SHA256);
    ctx.update(normal_address(address).as_bytes());
    ctx.update(&[0]);
    ctx.update(agent_id.as_bytes());
    let mut out = [0u8; 8];
    out.copy_from_slice(&ctx.finish().as_ref()[..8]);
    out
}

/// Indexes into `addresses`: the agent's order, first choice first.
pub fn rendezvous_order<S: AsRef<str>>(addresses: &[S], agent_id: &str) -> Vec<usize> {
    let mut keyed: Vec<([u8; 8], &str, usize)> = addresses
        .iter()
        .enumerate()
        .map(|(i, a)| (weight(a.as_ref(), agent_id), normal_address(a.as_ref()), i))
        .collect();
    keyed.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then_with(|| a.1.as_bytes().cmp(b.1.as_bytes()))
    });
    keyed.into_iter().map(|(_, _, i)| i).collect()
}

/// A random (version 4) UUID: the key of a store or capture that has none.
pub(crate) fn new_idempotency_key() -> String {
    let mut b = [0u8; 16];
    SystemRandom::new()
        .fill(&mut b)
        .expect("the system's random source works");
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Which daemons failed lately.
pub(crate) struct Fleet {
    addresses: Vec<String>,
    down_for: Duration,
    down_until: Mutex<Vec<Option<Instant>>>,
}

impl Fleet {
    pub(crate) fn new(addresses: Vec<String>, down_for: Duration) -> Result<Fleet, String> {
        for (i, a) in addresses.iter().enumerate() {
            if let Some(b) = addresses[..i]
                .iter()
                .find(|b| normal_address(b) == normal_address(a))
            {
                return Err(format!("addresses {b} and {a} name the same daemon"));
            }
        }
        let n = addresses.len();
        Ok(Fleet {
            addresses,
            down_for,
            down_until: Mutex::new(vec![None; n]),
        })
    }

    /// The agent's order with the daemons marked down moved to the end.
    pub(crate) fn order(&self, agent_id: &str) -> Vec<usize> {
        let order = rendezvous_order(&self.addresses, agent_id);
        let now = Instant::now();
        let down = self.down_until.lock().unwrap();
        let is_down = |i: &usize| down[*i].is_some_and(|t| t > now);
        let mut out: Vec<usize> = order.iter().copied().filter(|i| !is_down(i)).collect();
        out.extend(order.iter().copied().filter(|i| is_down(i)));
        out
    }

    pub(crate) fn mark_down(&self, i: usize) {
        self.down_until.lock().unwrap()[i] = Some(Instant::now() + self.down_for);
    }

    pub(crate) fn mark_up(&self, i: usize) {
        self.down_until.lock().unwrap()[i] = None;
    }
}
