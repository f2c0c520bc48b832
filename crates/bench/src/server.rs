//! The embedded server the bench reads from, and programs pinned to CPUs.

use sluice_console::output::Failure;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The embedded server, a child process killed on drop.
pub(super) struct Server {
    child: Child,
    pub(super) http: String,
    pub(super) https: String,
    pub(super) ca: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

/// Starts `sluice serve` (in memory) with the service profile `profile`.
pub(super) fn start_server(pin: bool, profile: &str) -> Result<Server, Failure> {
    let dir = tempfile::tempdir().map_err(|e| Failure::Other(format!("temp dir: {e}")))?;
    let ca = dir.path().join("ca.pem");
    let port = |l: std::net::TcpListener| l.local_addr().map(|a| a.port()).unwrap_or(0);
    let http = port(
        std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| Failure::Other(e.to_string()))?,
    );
    let https = port(
        std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| Failure::Other(e.to_string()))?,
    );
    let exe = std::env::current_exe()
        .map_err(|e| Failure::Other(format!("cannot find the sluice binary: {e}")))?;
    let mut cmd = pinned(pin.then_some("0"), &exe);
    cmd.args([
        "serve",
        "--addr",
        &format!("127.0.0.1:{http}"),
        "--https-addr",
        &format!("127.0.0.1:{https}"),
        "--profile",
        profile,
        "--ca-out",
    ])
    .arg(&ca)
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    let mut child = cmd
        .spawn()
        .map_err(|e| Failure::Other(format!("cannot start `sluice serve`: {e}")))?;
    let mut out = std::io::BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    loop {
        line.clear();
        let n = std::io::BufRead::read_line(&mut out, &mut line)
            .map_err(|e| Failure::Other(format!("reading the server's output: {e}")))?;
        if n == 0 {
            return Err(Failure::Other(
                "`sluice serve` exited before it was ready".into(),
            ));
        }
        if line.trim() == "ready" {
            break;
        }
    }
    // Keep draining so the server never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    Ok(Server {
        child,
        http: format!("http://127.0.0.1:{http}"),
        https: format!("https://localhost:{https}"),
        ca,
        _dir: dir,
    })
}

/// A command, under `taskset -c CPUS` when pinning.
pub(super) fn pinned(cpus: Option<&str>, program: &Path) -> Command {
    match cpus {
        Some(c) => {
            let mut cmd = Command::new("taskset");
            cmd.arg("-c").arg(c).arg(program);
            cmd
        }
        None => Command::new(program),
    }
}

/// The CPUs the clients run on: all but CPU 0 (the server's) when pinning.
pub(super) fn client_cpus(pin: bool) -> Option<String> {
    if !pin {
        return None;
    }
    let n = std::thread::available_parallelism().map_or(2, |n| n.get());
    Some(if n <= 2 {
        "1".to_string()
    } else {
        format!("1-{}", n - 1)
    })
}

/// `cmd`'s path on `PATH`, if it is installed.
pub(super) fn which(cmd: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(cmd))
            .find(|f| f.is_file())
    })
}
