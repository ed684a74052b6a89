//! The runtime records its PID: a forked child gets a clear error, never a hang.

use std::time::Duration;

use harness_core::{runtime, Client, Request};
use serde_json::json;

#[test]
fn a_forked_child_gets_a_clear_error_instead_of_a_hang() {
    let client = Client::from_value(json!({"log": {"enabled": false}, "services": {"svc": {"base_url": "http://127.0.0.1:9"}}})).unwrap();
    runtime::handle().expect("the parent's runtime works");
    // SAFETY: the child only runs Harness's PID check (which must not touch the parent's
    // runtime threads) and leaves with _exit, skipping destructors and atexit handlers.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = match (runtime::handle(), client.spawn(Request::new("svc", "GET", "/x"))) {
            (Err(a), Err(b)) if a.message.contains("fork") && b.name() == "HarnessError" => 0,
            _ => 1,
        };
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
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child saw no clear fork error (status {status})");
}
