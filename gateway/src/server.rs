//! The listener: HTTP/1.1 connections served one task each on the core's runtime, with the
//! head size and head read timeout set on hyper, and a graceful drain.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use harness_core::HarnessError;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::config::Loaded;
use crate::state::Gateway;

/// A running gateway (tests, embedding): its address, and how to stop it.
pub struct Started {
    pub addr: SocketAddr,
    pub gateway: Arc<Gateway>,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<()>,
}

impl Started {
    /// Stops accepting, drains (up to `drain_ms`), and waits until that is done.
    pub async fn shutdown(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = self.done.await;
    }

    /// Asks for the drain without waiting for it.
    pub fn begin_shutdown(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }

    pub async fn wait(self) {
        let _ = self.done.await;
    }
}

/// Binds `listen` and serves `loaded` until `shutdown` is called (on the caller's runtime, which
/// for `harness serve` is the core's).
pub async fn start(loaded: Loaded, path: Option<String>, listen: &str) -> Result<Started, HarnessError> {
    let gw = Gateway::new(loaded, path)?;
    let listener = TcpListener::bind(listen).await.map_err(|e| HarnessError::config(format!("--listen {listen}: {e}")))?;
    let addr = listener.local_addr().map_err(|e| HarnessError::config(format!("--listen: {e}")))?;
    let (stop, stopped) = oneshot::channel();
    let done = tokio::spawn(serve(gw.clone(), listener, stopped));
    Ok(Started { addr, gateway: gw, stop: Some(stop), done })
}

async fn serve(gw: Arc<Gateway>, listener: TcpListener, mut stopped: oneshot::Receiver<()>) {
    let graceful = GracefulShutdown::new();
    // Built once, rebuilt only when a reload changes the body limit (a clone is a reference count).
    let mut router: Option<(usize, axum::Router)> = None;
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = &mut stopped => break,
        };
        let Ok((stream, _)) = accepted else { continue };
        let _ = stream.set_nodelay(true);
        let g = gw.gateway_config();
        let router = match &router {
            Some((limit, r)) if *limit == g.max_body_bytes => r.clone(),
            _ => {
                let r = crate::handlers::router(gw.clone(), g.max_body_bytes);
                router = Some((g.max_body_bytes, r.clone()));
                r
            }
        };
        let mut http = hyper::server::conn::http1::Builder::new();
        // hyper's floor for the read buffer is 8 KiB; a head over it is refused with 431.
        http.max_buf_size(g.max_header_bytes.max(8192))
            .timer(TokioTimer::new())
            .header_read_timeout(Duration::from_millis(g.header_timeout_ms))
            .keep_alive(true);
        let conn = http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(router));
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _ = conn.await;
        });
    }
    drop(listener);
    let drain = Duration::from_millis(gw.gateway_config().drain_ms);
    let in_flight = gw.in_flight.load(Ordering::Relaxed);
    eprintln!("{}", serde_json::json!({"event": "harness.gateway_draining", "in_flight": in_flight, "drain_ms": drain.as_millis() as u64}));
    match tokio::time::timeout(drain, graceful.shutdown()).await {
        Ok(()) => eprintln!("{}", serde_json::json!({"event": "harness.gateway_drained"})),
        Err(_) => eprintln!("{}", serde_json::json!({"event": "harness.gateway_drain_timeout", "in_flight": gw.in_flight.load(Ordering::Relaxed)})),
    }
    gw.client.flush();
}

/// `harness serve`: loads the config, serves on the core's runtime until SIGTERM or Ctrl-C,
/// drains, and returns.
pub fn run(config_path: &str, listen: &str) -> Result<(), HarnessError> {
    let loaded = Loaded::from_path(config_path)?;
    let runtime = harness_core::runtime::handle()?;
    runtime.block_on(async {
        let mut started = start(loaded, Some(config_path.to_string()), listen).await?;
        eprintln!("{}", serde_json::json!({"event": "harness.gateway_listening", "addr": started.addr.to_string()}));
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).map_err(|e| HarnessError::config(format!("signals: {e}")))?;
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        started.begin_shutdown();
        started.wait().await;
        Ok(())
    })
}
