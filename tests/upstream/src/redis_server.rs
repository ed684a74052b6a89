//! A real `redis-server` on a free loopback port for tests (no persistence), killed when
//! dropped. `.ci/run` installs redis-server; without it, `start` says how to get it.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    child: Child,
    pub port: u16,
    /// With persistence: the folder of its append-only file (kept across `restart`).
    dir: Option<std::path::PathBuf>,
}

impl RedisServer {
    pub fn start() -> RedisServer {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        RedisServer { child: spawn(port, None), port, dir: None }
    }

    /// A server that keeps its data across `restart` (an append-only file, fsync always).
    pub fn start_persistent() -> RedisServer {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = std::env::temp_dir().join(format!("harness-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        RedisServer { child: spawn(port, Some(&dir)), port, dir: Some(dir) }
    }

    /// Kills the server and starts it again on the same port (a restart).
    pub fn restart(&mut self) {
        self.stop();
        self.child = spawn(self.port, self.dir.as_deref());
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Kills the server now (an outage).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn spawn(port: u16, dir: Option<&std::path::Path>) -> Child {
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""]);
    match dir {
        Some(d) => cmd.args(["--appendonly", "yes", "--appendfsync", "always", "--dir", &d.display().to_string()]),
        None => cmd.args(["--appendonly", "no"]),
    };
    let child = cmd
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server must be installed (apt-get install -y redis-server); .ci/run installs it");
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(start.elapsed() < Duration::from_secs(10), "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}
