//! Webhook bodies held before their signature is checked, and how fast they must come.
//!
//! A GitHub body must be read whole to check its signature, so until then anyone can make the
//! server hold it. What a body holds is charged for the bytes received, never for the length it
//! announces: announcing 25 MiB and sending nothing holds nothing. A body stays in memory up to
//! `SPOOL_ABOVE` bytes; past that it goes on to an unnamed owner-only file (it disappears with
//! its handle, or the process), while the signature is computed as it streams in, so an unsigned
//! body is never read back. Memory per body is thus bounded (the connection cap bounds bodies),
//! and the bytes held (memory and disk) share one budget: each client (peer address; an IPv6 /64
//! counts as one) may hold only a share of it, so a few clients cannot take it all; and a body
//! must keep coming at a minimum rate after a short grace, so a slow sender gives its share back
//! in seconds instead of holding it until the body deadline.

use axum::body::{Body, Bytes};
use futures::StreamExt;
use std::collections::HashMap;
use std::io::{Read, Seek, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// Time a body may take before the minimum rate applies (connection set-up, a first slow burst).
pub const RATE_GRACE: Duration = Duration::from_secs(2);
/// Bytes of one body kept in memory; more goes to a spool file.
pub const SPOOL_ABOVE: usize = 64 * 1024;

/// The budget of unverified bytes (received and not yet checked), and each client's share of it.
pub struct UnverifiedBudget {
    total: usize,
    per_client: usize,
    held: Mutex<Held>,
    gauge: prometheus::IntGauge,
}

#[derive(Default)]
struct Held {
    total: usize,
    clients: HashMap<IpAddr, usize>,
}

/// Why a body was not given room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoRoom {
    #[error("this client holds its share of the bodies in flight")]
    ClientShare,
    #[error("too many webhook bodies in flight")]
    Total,
}

/// What one body holds: given back when dropped. Shown in `fluxplan_webhook_unverified_bytes`.
pub struct Share {
    budget: Arc<UnverifiedBudget>,
    client: IpAddr,
    bytes: usize,
}

impl UnverifiedBudget {
    /// `total` bytes at once, at most `per_client` of them for one client.
    pub fn new(total: usize, per_client: usize, gauge: prometheus::IntGauge) -> Arc<Self> {
        Arc::new(UnverifiedBudget { total, per_client: per_client.min(total), held: Mutex::default(), gauge })
    }

    /// An empty share for a body from `peer`; it grows with the bytes received.
    pub fn share(self: &Arc<Self>, peer: IpAddr) -> Share {
        Share { budget: self.clone(), client: client_of(peer), bytes: 0 }
    }
}

impl Share {
    /// Room for `bytes` more, if the client's share and the budget have it.
    pub fn grow(&mut self, bytes: usize) -> Result<(), NoRoom> {
        let budget = &self.budget;
        let mut held = budget.held.lock().unwrap_or_else(|e| e.into_inner());
        let holds = held.clients.get(&self.client).copied().unwrap_or(0);
        if holds + bytes > budget.per_client {
            return Err(NoRoom::ClientShare);
        }
        if held.total + bytes > budget.total {
            return Err(NoRoom::Total);
        }
        held.total += bytes;
        held.clients.insert(self.client, holds + bytes);
        self.bytes += bytes;
        budget.gauge.add(bytes as i64);
        Ok(())
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        if self.bytes == 0 {
            return;
        }
        let mut held = self.budget.held.lock().unwrap_or_else(|e| e.into_inner());
        held.total = held.total.saturating_sub(self.bytes);
        if let Some(holds) = held.clients.get_mut(&self.client) {
            *holds = holds.saturating_sub(self.bytes);
            if *holds == 0 {
                held.clients.remove(&self.client);
            }
        }
        self.budget.gauge.sub(self.bytes as i64);
    }
}

/// The client an address stands for: an IPv6 host usually owns its whole /64.
pub fn client_of(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(_) => peer,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        },
    }
}

/// How a body must arrive.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// The whole body, from the moment its reading starts.
    pub deadline: Duration,
    /// Bytes per second on average after `RATE_GRACE`; 0: no minimum.
    pub min_rate: u64,
}

/// Why a body was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error("the body is over the size limit or broken")]
    TooLarge,
    #[error("the body was not sent in time")]
    TimedOut,
    #[error("the body is sent too slowly")]
    TooSlow,
    #[error("{0}")]
    NoRoom(NoRoom),
    #[error("the body cannot be spooled")]
    Spool,
}

/// A body read whole: in memory, or spooled. It holds its share of the budget until dropped.
pub struct Received {
    held: Spooled,
    _share: Option<Share>,
}

enum Spooled {
    Memory(Vec<u8>),
    File(std::fs::File),
}

impl Received {
    /// The body in memory (a spooled one read back: only do so once it is verified).
    pub async fn into_bytes(self) -> std::io::Result<Bytes> {
        match self.held {
            Spooled::Memory(bytes) => Ok(bytes.into()),
            Spooled::File(mut file) => tokio::task::spawn_blocking(move || {
                file.rewind()?;
                let mut bytes = Vec::new();
                file.read_to_end(&mut bytes)?;
                Ok(Bytes::from(bytes))
            })
            .await
            .map_err(std::io::Error::other)?,
        }
    }
}

/// Where bodies over `SPOOL_ABOVE` go.
#[derive(Debug, Clone)]
pub struct Spool(pub PathBuf);

impl Spool {
    fn file(&self) -> std::io::Result<std::fs::File> {
        // Unnamed where the system allows it, else unlinked at once: nothing is left behind.
        tempfile::tempfile_in(&self.0)
    }

    pub fn dir(&self) -> &Path {
        &self.0
    }
}

/// Reads `body` (at most `limit` bytes) at `pace`: by the deadline, and after the grace at least
/// `min_rate` bytes per second of the time past it. Each chunk is charged to `share` (when the
/// body is unverified) before it is kept, and shown to `each` (a signature being computed).
pub async fn read(
    body: Body,
    limit: usize,
    pace: Pace,
    mut share: Option<Share>,
    spool: &Spool,
    mut each: impl FnMut(&[u8]),
) -> Result<Received, ReadError> {
    let started = Instant::now();
    let deadline = started + pace.deadline;
    let mut stream = body.into_data_stream();
    let mut memory = Vec::new();
    let mut file: Option<std::fs::File> = None;
    let mut read = 0usize;
    loop {
        // Each byte received buys 1/min_rate seconds more.
        let due = match pace.min_rate {
            0 => deadline,
            rate => deadline.min(started + RATE_GRACE + Duration::from_secs_f64(read as f64 / rate as f64)),
        };
        let chunk = match tokio::time::timeout_at(due, stream.next()).await {
            Ok(Some(Ok(chunk))) if read + chunk.len() <= limit => chunk,
            Ok(Some(_)) => return Err(ReadError::TooLarge),
            Ok(None) => break,
            Err(_) if due < deadline => return Err(ReadError::TooSlow),
            Err(_) => return Err(ReadError::TimedOut),
        };
        if let Some(share) = &mut share {
            share.grow(chunk.len()).map_err(ReadError::NoRoom)?;
        }
        each(&chunk);
        read += chunk.len();
        memory.extend_from_slice(&chunk);
        if memory.len() > SPOOL_ABOVE {
            // Writes of this size land in the page cache: short enough to make in place.
            let spooled = match &mut file {
                Some(file) => file,
                None => file.insert(spool.file().map_err(|e| spool_failed(spool, &e))?),
            };
            spooled.write_all(&memory).map_err(|e| spool_failed(spool, &e))?;
            memory.clear();
        }
    }
    let held = match file {
        None => Spooled::Memory(memory),
        Some(mut file) => {
            file.write_all(&memory).map_err(|e| spool_failed(spool, &e))?;
            Spooled::File(file)
        }
    };
    Ok(Received { held, _share: share })
}

fn spool_failed(spool: &Spool, error: &std::io::Error) -> ReadError {
    tracing::error!(dir = %spool.dir().display(), %error, "cannot spool a webhook body");
    ReadError::Spool
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(total: usize, per_client: usize) -> Arc<UnverifiedBudget> {
        UnverifiedBudget::new(total, per_client, prometheus::IntGauge::new("g", "g").unwrap())
    }

    fn take(budget: &Arc<UnverifiedBudget>, peer: IpAddr, bytes: usize) -> Result<Share, NoRoom> {
        let mut share = budget.share(peer);
        share.grow(bytes)?;
        Ok(share)
    }

    #[test]
    fn a_client_holds_at_most_its_share_and_gets_it_back() {
        let budget = budget(100, 60);
        let (one, two, three) =
            ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap(), "10.0.0.3".parse().unwrap());
        let first = take(&budget, one, 50).unwrap();
        assert_eq!(take(&budget, one, 20).err(), Some(NoRoom::ClientShare));
        let second = take(&budget, two, 40).unwrap();
        assert_eq!(take(&budget, three, 20).err(), Some(NoRoom::Total));
        assert_eq!(budget.gauge.get(), 90);
        drop(first);
        assert!(take(&budget, one, 60).is_ok(), "its share is back");
        drop(second);
        assert_eq!(budget.gauge.get(), 0);
    }

    #[test]
    fn an_ipv6_client_is_its_slash_64() {
        let budget = budget(100, 60);
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        let _held = take(&budget, a, 50).unwrap();
        assert_eq!(take(&budget, b, 20).err(), Some(NoRoom::ClientShare));
        assert_eq!(client_of(mapped), "10.0.0.1".parse::<IpAddr>().unwrap());
    }

    fn channel_body() -> (futures::channel::mpsc::Sender<Result<Bytes, std::io::Error>>, Body) {
        let (tx, rx) = futures::channel::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
        (tx, Body::from_stream(rx))
    }

    #[tokio::test]
    async fn a_body_slower_than_the_minimum_rate_is_cut_after_the_grace() {
        let (mut sender, body) = channel_body();
        let pace = Pace { deadline: Duration::from_secs(600), min_rate: 100 };
        let spool = Spool(std::env::temp_dir());
        let reading = tokio::spawn(async move { read(body, 1000, pace, None, &spool, |_| ()).await.err() });
        // 100 bytes buy one second past the grace; nothing more comes.
        futures::SinkExt::send(&mut sender, Ok(Bytes::from(vec![b'x'; 100]))).await.unwrap();
        assert_eq!(reading.await.unwrap(), Some(ReadError::TooSlow));
        drop(sender);
    }

    #[tokio::test]
    async fn a_body_holds_what_it_sent_and_a_large_one_is_spooled() {
        let budget = budget(1 << 30, 1 << 30);
        let (mut sender, body) = channel_body();
        let pace = Pace { deadline: Duration::from_secs(600), min_rate: 0 };
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool(dir.path().to_path_buf());
        let share = budget.share("10.0.0.1".parse().unwrap());
        let seen = Arc::new(Mutex::new(0usize));
        let counted = seen.clone();
        let reading = tokio::spawn(async move {
            read(body, 1 << 20, pace, Some(share), &spool, |chunk| *counted.lock().unwrap() += chunk.len())
                .await
        });
        assert_eq!(budget.gauge.get(), 0, "nothing sent, nothing held");
        let chunk = vec![b'y'; 50_000];
        for _ in 0..4 {
            futures::SinkExt::send(&mut sender, Ok(Bytes::from(chunk.clone()))).await.unwrap();
        }
        drop(sender);
        let received = reading.await.unwrap().unwrap();
        assert!(matches!(received.held, Spooled::File(_)), "200 kB stayed in memory");
        assert_eq!(budget.gauge.get(), 200_000);
        assert_eq!(*seen.lock().unwrap(), 200_000);
        assert_eq!(received.into_bytes().await.unwrap(), Bytes::from(vec![b'y'; 200_000]));
        assert_eq!(budget.gauge.get(), 0);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the spool file left a name behind");
    }
}
