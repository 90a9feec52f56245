//! Serving HTTP with limits a hostile or broken client cannot get around: a cap on open
//! connections, and on those of one client (peer address; an IPv6 /64 counts as one), a deadline
//! for request headers (idle keep-alive connections included), and a graceful shutdown that lets
//! answers in flight finish. At a cap, the connection idle the longest (waiting for a request, or
//! for the rest of its headers) is closed to make room; at the global cap with none idle, one of
//! the client holding the most connections (requests waiting for a body included) is closed, or
//! the new one when its own client would hold the most. So neither idle connections nor one
//! client's requests can lock others (`/healthz` included) out. Each request carries its peer's
//! address (`ConnectInfo`), which the webhook budget shares out by.

use axum::extract::ConnectInfo;
use axum::response::Response;
use axum::Router;
use futures::future::BoxFuture;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Notify, Semaphore};

use super::budget::client_of;

/// How much of the service a client may hold.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Open connections at once; beyond them the longest idle one is closed, or, when every
    /// one is answering a request, the new one.
    pub max_connections: usize,
    /// Open connections of one client at once; beyond them its longest idle one is closed, or
    /// the new one.
    pub max_connections_per_client: usize,
    /// Time a client has to send a request's headers.
    pub header_timeout: Duration,
}

/// After shutdown is asked for, how long answers in flight may take.
const DRAIN: Duration = Duration::from_secs(10);
/// After a failed accept (file descriptors exhausted, say), a pause before the next.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// How long a connection asked to close may take (an idle one closes at once).
const CLOSE_WAIT: Duration = Duration::from_secs(1);
/// How long the connection it makes room for waits for its slot (the closing one hands it over).
const HANDOVER_WAIT: Duration = Duration::from_secs(5);

type Slot = tokio::sync::OwnedSemaphorePermit;

/// One open connection, as the cap sees it.
struct Tracked {
    client: IpAddr,
    /// Holds a slot (one waiting for a slot handed over cannot hand one on).
    has_slot: AtomicBool,
    /// Requests being answered on it; none: it is idle.
    busy: AtomicUsize,
    /// Asked to close already (not picked twice).
    closing: AtomicBool,
    close: Notify,
    /// The connection its slot goes to once it has closed.
    heir: Mutex<Option<tokio::sync::oneshot::Sender<Slot>>>,
}

/// The open connections (those waiting for a slot included), oldest first, and how many each
/// client has.
#[derive(Default)]
struct Open {
    next: AtomicUsize,
    inner: Mutex<OpenInner>,
}

#[derive(Default)]
struct OpenInner {
    connections: BTreeMap<usize, Arc<Tracked>>,
    per_client: HashMap<IpAddr, usize>,
}

/// Where a new connection's slot comes from.
enum Room {
    Free(Slot),
    HandedOver(tokio::sync::oneshot::Receiver<Slot>),
    None,
}

impl Open {
    fn lock(&self) -> std::sync::MutexGuard<'_, OpenInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn remove(&self, id: usize) {
        let mut inner = self.lock();
        if let Some(tracked) = inner.connections.remove(&id) {
            if let Some(count) = inner.per_client.get_mut(&tracked.client) {
                *count -= 1;
                if *count == 0 {
                    inner.per_client.remove(&tracked.client);
                }
            }
        }
    }

    /// Finds room for a connection from `client` and registers it: known to the caps before its
    /// task runs, as the next connection may have to close it.
    fn admit(
        &self,
        client: IpAddr,
        slots: &Arc<Semaphore>,
        limits: &ConnectionLimits,
    ) -> Option<(usize, Arc<Tracked>, Room)> {
        let mut inner = self.lock();
        let holds = inner.per_client.get(&client).copied().unwrap_or(0);
        let room = if holds >= limits.max_connections_per_client {
            // Its own cap: only its own idle connection makes room.
            Self::hand_over(&inner, |c| c.client == client && idle(c))
        } else {
            match slots.clone().try_acquire_owned() {
                Ok(slot) => Room::Free(slot),
                Err(_) => match Self::hand_over(&inner, idle) {
                    Room::None => {
                        // Nothing idle: a connection of the client holding the most, unless
                        // the new one's client would then hold the most.
                        let mut held: HashMap<IpAddr, usize> = HashMap::new();
                        for c in inner.connections.values().filter(|c| closable(c)) {
                            *held.entry(c.client).or_default() += 1;
                        }
                        let most = held
                            .iter()
                            .filter(|(c, _)| **c != client)
                            .max_by_key(|(_, n)| **n)
                            .map(|(c, n)| (*c, *n));
                        match most {
                            Some((victim, n)) if n > holds => {
                                Self::hand_over(&inner, |c| c.client == victim && closable(c))
                            }
                            _ => Room::None,
                        }
                    }
                    room => room,
                },
            }
        };
        if matches!(room, Room::None) {
            return None;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let tracked = Arc::new(Tracked {
            client,
            has_slot: AtomicBool::new(matches!(room, Room::Free(_))),
            busy: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            close: Notify::new(),
            heir: Mutex::new(None),
        });
        inner.connections.insert(id, tracked.clone());
        *inner.per_client.entry(client).or_default() += 1;
        Some((id, tracked, room))
    }

    /// Asks the oldest connection that `pick` picks to close and hand its slot over.
    fn hand_over(inner: &OpenInner, pick: impl Fn(&Tracked) -> bool) -> Room {
        let picked = inner.connections.values().find(|c| pick(c) && !c.closing.swap(true, Ordering::SeqCst));
        let Some(picked) = picked else { return Room::None };
        let (heir, handed_over) = tokio::sync::oneshot::channel();
        *picked.heir.lock().unwrap_or_else(|e| e.into_inner()) = Some(heir);
        picked.close.notify_one();
        Room::HandedOver(handed_over)
    }
}

/// Holds a slot it could hand over, and is not closing already.
fn closable(c: &Tracked) -> bool {
    c.has_slot.load(Ordering::SeqCst) && !c.closing.load(Ordering::SeqCst)
}

/// Closable, and answering no request.
fn idle(c: &Tracked) -> bool {
    closable(c) && c.busy.load(Ordering::SeqCst) == 0
}

/// Serves `app` until `shutdown` completes; `refused` counts connections closed for the cap.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    refused: prometheus::IntCounter,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let open = Arc::new(Open::default());
    let (stopping, stop) = tokio::sync::watch::channel(false);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    builder.http2().timer(TokioTimer::new()).keep_alive_interval(limits.header_timeout);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(connection) => connection,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        // A free slot, or the one a connection hands over as it closes.
        let Some((id, tracked, room)) = open.admit(client_of(peer.ip()), &slots, &limits) else {
            refused.inc();
            continue; // dropping the stream closes it
        };
        let (open, builder, refused, mut stop) =
            (open.clone(), builder.clone(), refused.clone(), stop.clone());
        let app = app.clone();
        tokio::spawn(async move {
            let slot = match room {
                Room::Free(slot) => slot,
                Room::HandedOver(handed_over) => match tokio::time::timeout(HANDOVER_WAIT, handed_over).await
                {
                    Ok(Ok(slot)) => slot,
                    _ => {
                        refused.inc();
                        open.remove(id);
                        return;
                    }
                },
                Room::None => {
                    open.remove(id);
                    return;
                }
            };
            tracked.has_slot.store(true, Ordering::SeqCst);
            let service = TowerToHyperService::new(PeerAware { app, peer, tracked: tracked.clone() });
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            tokio::pin!(connection);
            let closing = tokio::select! {
                _ = connection.as_mut() => false,
                _ = tracked.close.notified() => true,
                _ = stop.wait_for(|stopping| *stopping) => true,
            };
            if closing {
                connection.as_mut().graceful_shutdown();
                let wait = if *stop.borrow() { DRAIN } else { CLOSE_WAIT };
                let _ = tokio::time::timeout(wait, connection).await;
            }
            open.remove(id);
            let heir = tracked.heir.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(heir) = heir {
                let _ = heir.send(slot); // a heir gone gives it back to the pool
            }
        });
    }
    drop(listener);
    let _ = stopping.send(true);
    // Every slot back: every connection closed.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(DRAIN, slots.acquire_many(all)).await.is_err() {
        tracing::warn!("connections still open after {}s: closing them", DRAIN.as_secs());
    }
}

/// The app, told each request's peer address, counting the requests it is answering.
#[derive(Clone)]
struct PeerAware {
    app: Router,
    peer: SocketAddr,
    tracked: Arc<Tracked>,
}

/// Counts one request as being answered until dropped.
struct Answering(Arc<Tracked>);

impl Answering {
    fn new(tracked: Arc<Tracked>) -> Self {
        tracked.busy.fetch_add(1, Ordering::SeqCst);
        Answering(tracked)
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<B> tower::Service<http::Request<B>> for PeerAware
where
    Router: tower::Service<http::Request<B>, Response = Response, Error = Infallible>,
    <Router as tower::Service<http::Request<B>>>::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let answering = Answering::new(self.tracked.clone());
        request.extensions_mut().insert(ConnectInfo(self.peer));
        let answer = tower::ServiceExt::oneshot(self.app.clone(), request);
        Box::pin(async move {
            let response = answer.await;
            drop(answering);
            response
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    /// Serves `app` with a cap of `max_connections` until the returned sender is dropped.
    async fn start(
        app: Router,
        max_connections: usize,
    ) -> (SocketAddr, prometheus::IntCounter, tokio::sync::oneshot::Sender<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let refused = prometheus::IntCounter::new("refused", "refused").unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let limits = ConnectionLimits {
            max_connections,
            max_connections_per_client: max_connections,
            header_timeout: Duration::from_secs(600),
        };
        tokio::spawn(serve(listener, app, limits, refused.clone(), async move {
            let _ = stopped.await;
        }));
        (address, refused, stop)
    }

    /// True when the server closed `stream` without an answer (or reset it).
    async fn closed_unanswered(stream: &mut TcpStream) -> bool {
        let mut answer = Vec::new();
        match stream.read_to_end(&mut answer).await {
            Ok(_) => answer.is_empty(),
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }

    #[tokio::test]
    async fn when_every_connection_is_answering_a_new_one_is_closed_at_once() {
        let (entered, release) = (Arc::new(AtomicUsize::new(0)), Arc::new(Semaphore::new(0)));
        let hold = {
            let (entered, release) = (entered.clone(), release.clone());
            move || async move {
                entered.fetch_add(1, Ordering::SeqCst);
                let _ = release.acquire().await;
                "done"
            }
        };
        let (address, refused, _stop) = start(Router::new().route("/hold", get(hold)), 2).await;
        let mut held = Vec::new();
        for _ in 0..2 {
            let mut stream = TcpStream::connect(address).await.unwrap();
            stream.write_all(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
            held.push(stream);
        }
        while entered.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut over = TcpStream::connect(address).await.unwrap();
        let _ = over.write_all(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(closed_unanswered(&mut over).await, "a connection over the cap was served");
        assert_eq!(refused.get(), 1);
        release.add_permits(2);
    }

    #[tokio::test]
    async fn at_the_cap_the_longest_idle_connection_makes_room() {
        let (address, refused, _stop) = start(Router::new().route("/", get(|| async { "ok" })), 2).await;
        // Accepted in order: two idle connections take every slot before the request comes.
        let mut oldest = TcpStream::connect(address).await.unwrap();
        let _newer = TcpStream::connect(address).await.unwrap();
        let mut asking = TcpStream::connect(address).await.unwrap();
        asking.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
        let mut answer = String::new();
        asking.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(closed_unanswered(&mut oldest).await);
        assert_eq!(refused.get(), 0);
    }
}
