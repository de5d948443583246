//! The real `frontdesk-server` binary as a child process, for tests that restart or kill it.

use std::{
    io::{BufRead, BufReader, Write},
    path::Path,
    process::{Child, Command, Stdio},
    time::Duration,
};

use frontdesk_client::Client;

pub struct ServerProcess {
    child: Child,
    pub addr: String,
}

/// Starts the binary on 127.0.0.1:0 with a scripted model (a test double) and waits for the
/// address it logs. Servers started on one database are one replica restarted (the same
/// `runs.replica_id`), as a server restarted on its host and port is: each takes the runs its
/// predecessor left running back at once.
pub fn spawn_server(db: &Path, script: &serde_json::Value, dir: &Path, name: &str) -> ServerProcess {
    spawn_replica(db, script, dir, name, &format!("test-replica:{}", db.display()), &[])
}

/// [`spawn_server`] as the replica `replica_id`, with more settings as `FRONTDESK__...`
/// variables.
pub fn spawn_replica(
    db: &Path,
    script: &serde_json::Value,
    dir: &Path,
    name: &str,
    replica_id: &str,
    settings: &[(&str, &str)],
) -> ServerProcess {
    let script_path = dir.join(format!("{name}.json"));
    std::fs::write(&script_path, script.to_string()).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_frontdesk-server"));
    command
        .args(["--listen", "127.0.0.1:0", "--log-format", "json", "--model-provider", "scripted"])
        .arg("--database-url")
        .arg(format!("sqlite://{}", db.display()))
        .arg("--model-script")
        .arg(&script_path)
        .env("RUST_LOG", "info")
        .env("FRONTDESK__RUNS__REPLICA_ID", replica_id);
    // scripts/test.sh gives every server a secret to keep and greps the logs for it afterwards.
    // As the model's API key it changes nothing: the scripted provider never sends it.
    if let Ok(secret) = std::env::var(PLANTED_SECRET_VAR) {
        command.env("FRONTDESK__MODEL__API_KEY", secret);
    }
    let mut child = command
        .envs(settings.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("frontdesk-server starts");
    let stderr = child.stderr.take().unwrap();
    let mut log = log_file(name, child.id());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(log) = &mut log {
                let _ = writeln!(log, "{line}");
            }
            if let Ok(value) = serde_json::from_str::<serde_json::Value>(&line) {
                if value["message"] == "frontdesk-server listening" {
                    let _ = tx.send(value["addr"].as_str().unwrap_or_default().to_owned());
                }
            }
        }
    });
    let addr = rx.recv_timeout(Duration::from_secs(60)).expect("server logs its address");
    ServerProcess { child, addr }
}

/// A secret scripts/test.sh sets for every server these helpers start (see [`spawn_replica`]).
pub const PLANTED_SECRET_VAR: &str = "FRONTDESK_TEST_PLANTED_SECRET";

/// With `FRONTDESK_TEST_LOG_DIR` set (scripts/test.sh sets it), each server's stderr is also
/// kept in a file there, `<test binary>-<name>-<pid>.log`, for checks over a whole test run.
fn log_file(name: &str, pid: u32) -> Option<std::fs::File> {
    let dir = std::path::PathBuf::from(std::env::var_os("FRONTDESK_TEST_LOG_DIR")?);
    std::fs::create_dir_all(&dir).ok()?;
    let binary = std::env::current_exe().ok()?.file_stem()?.to_string_lossy().into_owned();
    std::fs::File::create(dir.join(format!("{binary}-{name}-{pid}.log"))).ok()
}

impl ServerProcess {
    /// The child's process id, for signals a test sends (`kill -HUP`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub async fn client(&self) -> Client {
        Client::connect(format!("http://{}", self.addr)).await.unwrap()
    }

    pub fn kill(mut self) {
        // SIGKILL: no shutdown hook, no flush, no chance to finish the turn.
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    pub fn terminate(mut self) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        assert!(status.success(), "graceful shutdown exits cleanly: {status:?}");
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
