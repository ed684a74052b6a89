//! `metrics.listen`: a `/metrics` endpoint for processes without their own (jobs, scripts).
//!
//! Hand-written on tokio TCP (one fixed GET answered, then the connection closes) rather
//! than a server framework: the core stays free of server code. Guarantees: a request
//! head is read up to 8 KiB within 5 s, anything but `GET /metrics` gets 404, the
//! listener stops when the client closes or a reload changes the address.

use std::sync::Weak;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::error::HarnessError;

const MAX_HEAD: usize = 8 * 1024;

/// Binds `addr` and serves until the task is aborted or `text` returns `None` (the client is gone).
pub fn start(addr: &str, text: impl Fn() -> Option<String> + Send + Sync + 'static) -> Result<tokio::task::JoinHandle<()>, HarnessError> {
    let handle = crate::runtime::handle()?;
    let std_listener = std::net::TcpListener::bind(addr).map_err(|e| HarnessError::config(format!("metrics.listen: cannot listen on {addr}: {e}")))?;
    std_listener.set_nonblocking(true).map_err(|e| HarnessError::config(format!("metrics.listen: {e}")))?;
    let text = std::sync::Arc::new(text);
    let task = handle.spawn(async move {
        let Ok(listener) = TcpListener::from_std(std_listener) else { return };
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { continue };
            let text = text.clone();
            tokio::spawn(async move {
                let mut head = Vec::with_capacity(512);
                let mut buf = [0u8; 1024];
                let read = tokio::time::timeout(Duration::from_secs(5), async {
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return false,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    true
                })
                .await;
                if !matches!(read, Ok(true)) {
                    return;
                }
                let first = head.split(|b| *b == b'\n').next().unwrap_or(&[]);
                let wanted = first.starts_with(b"GET /metrics ") || first.starts_with(b"GET /metrics?");
                let response = match (wanted, text.as_ref()()) {
                    (true, Some(body)) => format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    ),
                    _ => "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_string(),
                };
                let _ = stream.write_all(response.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    Ok(task)
}

/// A `text` function for an engine the scrape task must not keep alive.
pub fn weak_text<T: Send + Sync + 'static>(weak: Weak<T>, f: fn(&T) -> String) -> impl Fn() -> Option<String> + Send + Sync + 'static {
    move || weak.upgrade().map(|e| f(&e))
}
