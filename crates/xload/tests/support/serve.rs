//! A running `xload serve` on a free loopback port: started with the given
//! options, ready once it accepts a connection, stopped with SIGINT (its
//! summary returned) or on drop.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::run::{free_port, spawn_xload, wait_listening, XloadChild};

pub(crate) struct Serve {
    child: Option<XloadChild>,
    pub port: u16,
    /// When it was spawned: a child's wait timeout counts from its spawn.
    spawned: Instant,
}

impl Serve {
    /// `xload serve --listen 127.0.0.1:PORT --for 20s ARGS...`.
    pub(crate) fn start(args: &[&str]) -> Serve {
        let port = free_port();
        let mut all = vec![
            "serve".to_string(),
            "--listen".into(),
            format!("127.0.0.1:{port}"),
            "--for".into(),
            "20s".into(),
        ];
        all.extend(args.iter().map(|s| s.to_string()));
        let spawned = Instant::now();
        let child = spawn_xload(all);
        wait_listening(port);
        Serve {
            child: Some(child),
            port,
            spawned,
        }
    }

    /// A TCP connection to it with a 5 s read timeout.
    pub(crate) fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s
    }

    /// Stops it (SIGINT) and returns what it printed.
    pub(crate) fn stop(mut self) -> String {
        let c = self.child.take().expect("running");
        c.interrupt();
        let out = c.wait_timeout(self.spawned.elapsed() + Duration::from_secs(5));
        assert!(!out.timed_out, "xload serve did not stop on SIGINT");
        out.stdout
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(c) = self.child.take() {
            c.interrupt();
            let _ = c.wait_timeout(self.spawned.elapsed() + Duration::from_secs(5));
        }
    }
}
