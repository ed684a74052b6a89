//! After fork: the parent's client gives a clear error (never a hang), and the child
//! builds new clients on a fresh runtime of its own.

use std::time::Duration;

use harness_core::{runtime, Client, Operation, Outcome, Request};
use serde_json::json;

#[test]
fn a_forked_child_refuses_the_parents_client_and_builds_its_own() {
    let client = Client::from_value(json!({"log": {"enabled": false}, "services": {"svc": {"base_url": "http://127.0.0.1:9"}}})).unwrap();
    runtime::handle().expect("the parent's runtime works");
    // SAFETY: the child never touches the parent's runtime threads (Harness's PID checks
    // refuse that) and leaves with _exit, skipping destructors and atexit handlers.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // The parent's client refuses, on every entry point.
            let refused = |r: Option<Result<Result<Outcome, harness_core::HarnessError>, harness_core::HarnessError>>| {
                matches!(r, Some(Ok(Err(e)) | Err(e)) if e.message.contains("fork") && e.name() == "HarnessError")
            };
            let spawned = Operation::Request(client.clone(), Request::new("svc", "GET", "/x")).start().spawn().map(|mut t| t.wait_timeout(Duration::from_secs(5)));
            let blocking = Operation::Request(client.clone(), Request::new("svc", "GET", "/x")).start().blocking().map(|mut c| c.wait_timeout(Duration::from_secs(5)));
            let parents_refused = refused(spawned.unwrap_or_else(|e| Some(Err(e)))) && refused(blocking.unwrap_or_else(|e| Some(Err(e))));
            // A new client in the child works, on the child's own runtime.
            let rt = runtime::handle().expect("a fresh runtime in the child");
            let upstream = rt.block_on(async { tokio::spawn(harness_upstream::start()).await.unwrap() }).unwrap();
            let child_client = Client::from_value(json!({"log": {"enabled": false}, "services": {"svc": {"base_url": upstream.url()}}})).unwrap();
            let mut call = Operation::Request(child_client.clone(), Request::new("svc", "GET", "/ok")).start().blocking().unwrap();
            let resp = loop {
                if let Some(r) = call.wait_timeout(Duration::from_millis(100)) {
                    break r;
                }
            };
            let sync_ok = matches!(&resp, Ok(Ok(Outcome::Response(r))) if r.status == 200);
            let task = Operation::Request(child_client.clone(), Request::new("svc", "GET", "/ok")).start().spawn().unwrap();
            let async_ok = matches!(rt.block_on(task), Ok(Ok(Outcome::Response(r))) if r.status == 200);
            if parents_refused && sync_ok && async_ok { 0 } else { 1 }
        }))
        .unwrap_or(2);
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    let mut waited = Duration::ZERO;
    loop {
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            break;
        }
        assert!(waited < Duration::from_secs(10), "the forked child hung");
        std::thread::sleep(Duration::from_millis(20));
        waited += Duration::from_millis(20);
    }
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child: parent's client not refused, or no working client of its own (status {status})");
}
