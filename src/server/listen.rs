//! Serving HTTP with limits a hostile or broken client cannot get around: a cap on open
//! connections, a deadline for request headers (idle keep-alive connections included), and a
//! graceful shutdown that lets answers in flight finish.

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// How much of the service a client may hold.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Open connections at once; more are closed at once.
    pub max_connections: usize,
    /// Time a client has to send a request's headers.
    pub header_timeout: Duration,
}

/// After shutdown is asked for, how long answers in flight may take.
const DRAIN: Duration = Duration::from_secs(10);
/// After a failed accept (file descriptors exhausted, say), a pause before the next.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Serves `app` until `shutdown` completes; `refused` counts connections closed for the cap.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    refused: prometheus::IntCounter,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    builder.http2().timer(TokioTimer::new()).keep_alive_interval(limits.header_timeout);
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
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
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            refused.inc();
            continue; // dropping the stream closes it
        };
        let service = TowerToHyperService::new(app.clone());
        let connection = graceful
            .watch(builder.serve_connection_with_upgrades(TokioIo::new(stream), service).into_owned());
        tokio::spawn(async move {
            let _ = connection.await;
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN, graceful.shutdown()).await.is_err() {
        tracing::warn!("connections still open after {}s: closing them", DRAIN.as_secs());
    }
}
