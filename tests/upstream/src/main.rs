//! `harness-upstream`: prints `{"addr":..,"blackhole":..}` and serves until stdin closes.
use tokio::io::AsyncReadExt;

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> std::io::Result<()> {
    let upstream = harness_upstream::start().await?;
    println!("{}", serde_json::json!({"addr": upstream.addr.to_string(), "blackhole": upstream.blackhole.to_string(), "closed": upstream.closed.to_string()}));
    // Serve until the parent closes our stdin (or kills us), so no test leaves a server behind.
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 64];
    while stdin.read(&mut buf).await.map(|n| n > 0).unwrap_or(false) {}
    Ok(())
}
