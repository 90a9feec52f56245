//! Webhook bodies held before their signature is checked, and how fast they must come.
//!
//! A GitHub body must be read whole to check its signature, so until then anyone can make the
//! server hold it. The bodies in flight share one budget (memory stays bounded whatever their
//! number); each client (peer address; an IPv6 /64 counts as one) may hold only a share of it,
//! so one client cannot take it all; and a body must keep coming at a minimum rate after a short
//! grace, so a slow sender gives its share back in seconds instead of holding it until the
//! body deadline.

use axum::body::{Body, Bytes};
use futures::StreamExt;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// Time a body may take before the minimum rate applies (connection set-up, a first slow burst).
pub const RATE_GRACE: Duration = Duration::from_secs(2);

/// The budget of unverified bytes, and each client's share of it.
pub struct UnverifiedBudget {
    total: Arc<Semaphore>,
    per_client: usize,
    held: Mutex<HashMap<IpAddr, usize>>,
    gauge: prometheus::IntGauge,
}

/// Why a body was not given room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoRoom {
    #[error("this client holds its share of the bodies in flight")]
    ClientShare,
    #[error("too many webhook bodies in flight")]
    Total,
}

/// Room for one body: given back when dropped. Shown in `fluxplan_webhook_unverified_bytes`.
pub struct Share {
    _permit: OwnedSemaphorePermit,
    budget: Arc<UnverifiedBudget>,
    client: IpAddr,
    bytes: usize,
}

impl UnverifiedBudget {
    /// `total` bytes at once, at most `per_client` of them for one client.
    pub fn new(total: usize, per_client: usize, gauge: prometheus::IntGauge) -> Arc<Self> {
        Arc::new(UnverifiedBudget {
            total: Arc::new(Semaphore::new(total)),
            per_client: per_client.min(total),
            held: Mutex::default(),
            gauge,
        })
    }

    /// Room for `bytes` of a body from `peer`, if its share and the budget have it.
    pub fn take(self: &Arc<Self>, peer: IpAddr, bytes: usize) -> Result<Share, NoRoom> {
        let client = client_of(peer);
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let holds = held.get(&client).copied().unwrap_or(0);
        if holds + bytes > self.per_client {
            return Err(NoRoom::ClientShare);
        }
        let permits = u32::try_from(bytes).map_err(|_| NoRoom::Total)?;
        let permit = self.total.clone().try_acquire_many_owned(permits).map_err(|_| NoRoom::Total)?;
        held.insert(client, holds + bytes);
        self.gauge.add(bytes as i64);
        Ok(Share { _permit: permit, budget: self.clone(), client, bytes })
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut held = self.budget.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(holds) = held.get_mut(&self.client) {
            *holds = holds.saturating_sub(self.bytes);
            if *holds == 0 {
                held.remove(&self.client);
            }
        }
        self.budget.gauge.sub(self.bytes as i64);
    }
}

/// The client an address stands for: an IPv6 host usually owns its whole /64.
fn client_of(peer: IpAddr) -> IpAddr {
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
}

/// Reads `body` (at most `limit` bytes) at `pace`: by the deadline, and after the grace at least
/// `min_rate` bytes per second of the time past it.
pub async fn read(body: Body, limit: usize, expected: usize, pace: Pace) -> Result<Bytes, ReadError> {
    let started = Instant::now();
    let deadline = started + pace.deadline;
    let mut stream = body.into_data_stream();
    let mut read = Vec::with_capacity(expected.min(limit));
    loop {
        // Each byte received buys 1/min_rate seconds more.
        let due = match pace.min_rate {
            0 => deadline,
            rate => {
                deadline.min(started + RATE_GRACE + Duration::from_secs_f64(read.len() as f64 / rate as f64))
            }
        };
        match tokio::time::timeout_at(due, stream.next()).await {
            Ok(Some(Ok(chunk))) if read.len() + chunk.len() <= limit => read.extend_from_slice(&chunk),
            Ok(Some(_)) => return Err(ReadError::TooLarge),
            Ok(None) => return Ok(read.into()),
            Err(_) if due < deadline => return Err(ReadError::TooSlow),
            Err(_) => return Err(ReadError::TimedOut),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(total: usize, per_client: usize) -> Arc<UnverifiedBudget> {
        UnverifiedBudget::new(total, per_client, prometheus::IntGauge::new("g", "g").unwrap())
    }

    #[test]
    fn a_client_holds_at_most_its_share_and_gets_it_back() {
        let budget = budget(100, 60);
        let (one, two, three) =
            ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap(), "10.0.0.3".parse().unwrap());
        let first = budget.take(one, 50).unwrap();
        assert_eq!(budget.take(one, 20).err(), Some(NoRoom::ClientShare));
        let second = budget.take(two, 40).unwrap();
        assert_eq!(budget.take(three, 20).err(), Some(NoRoom::Total));
        assert_eq!(budget.gauge.get(), 90);
        drop(first);
        assert!(budget.take(one, 60).is_ok(), "its share is back");
        drop(second);
        assert_eq!(budget.gauge.get(), 0);
    }

    #[test]
    fn an_ipv6_client_is_its_slash_64() {
        let budget = budget(100, 60);
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        let _held = budget.take(a, 50).unwrap();
        assert_eq!(budget.take(b, 20).err(), Some(NoRoom::ClientShare));
        assert_eq!(client_of(mapped), "10.0.0.1".parse::<IpAddr>().unwrap());
    }

    #[tokio::test]
    async fn a_body_slower_than_the_minimum_rate_is_cut_after_the_grace() {
        let (mut sender, body) = {
            let (tx, rx) = futures::channel::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
            (tx, Body::from_stream(rx))
        };
        let pace = Pace { deadline: Duration::from_secs(600), min_rate: 100 };
        let reading = tokio::spawn(read(body, 1000, 1000, pace));
        // 100 bytes buy one second past the grace; nothing more comes.
        futures::SinkExt::send(&mut sender, Ok(Bytes::from(vec![b'x'; 100]))).await.unwrap();
        assert_eq!(reading.await.unwrap(), Err(ReadError::TooSlow));
        drop(sender);
    }
}
