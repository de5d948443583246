//! A private PostgreSQL server for tests that stop and start it (outages), so that they never
//! touch the shared server of `scripts/ensure-postgres.sh` that other tests use at the same time.
//!
//! It runs the same server binaries that script finds (the newest `/usr/lib/postgresql/*/bin`,
//! else `pg_ctl` on `PATH`), in a cluster initialised in a temporary directory, on a free
//! loopback port, with trust auth. As root, every PostgreSQL command runs as the `postgres`
//! user (initdb refuses root), as in the script. Dropping it stops the server and deletes the
//! cluster.

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Command, Output},
    time::Duration,
};

pub struct PrivatePostgres {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    /// Run PostgreSQL's commands as this user (when the test runs as root).
    run_as: Option<String>,
}

/// The directory of PostgreSQL's server binaries (`initdb`, `pg_ctl`, `postgres`) that run.
pub fn find_bindir() -> Option<PathBuf> {
    let runs = |d: &Path| {
        ["initdb", "pg_ctl", "postgres"].iter().all(|b| d.join(b).is_file())
            && ["postgres", "pg_ctl"]
                .iter()
                .all(|b| Command::new(d.join(b)).arg("--version").output().is_ok_and(|o| o.status.success()))
    };
    let mut dirs: Vec<(Vec<u32>, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version =
                entry.file_name().to_str()?.split('.').map(|p| p.parse().ok()).collect::<Option<Vec<u32>>>()?;
            Some((version, entry.path().join("bin")))
        })
        .collect();
    dirs.sort();
    if let Some((_, dir)) = dirs.into_iter().rev().find(|(_, d)| runs(d)) {
        return Some(dir);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("pg_ctl"))
        .find(|p| p.is_file())
        .and_then(|p| std::fs::canonicalize(p).ok())
        .and_then(|p| p.parent().map(Path::to_owned))
        .filter(|d| runs(d))
}

/// Whether the environment demands PostgreSQL (CI): then a missing server fails the test.
pub fn postgres_required() -> bool {
    std::env::var("FRONTDESK_REQUIRE_POSTGRES").as_deref() == Ok("1")
}

fn check(what: &str, output: std::io::Result<Output>) -> Output {
    let output = output.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

impl PrivatePostgres {
    /// Initialises and starts a private server; `None` (after printing why) when no PostgreSQL
    /// binaries are installed, unless `FRONTDESK_REQUIRE_POSTGRES=1`, which makes that a failure.
    pub fn start(test: &str) -> Option<Self> {
        let Some(bin) = find_bindir() else {
            assert!(
                !postgres_required(),
                "FRONTDESK_REQUIRE_POSTGRES=1 but no PostgreSQL server binaries were found \
                 (run scripts/ensure-postgres.sh, which installs them)"
            );
            eprintln!(
                "skipping {test}: no PostgreSQL server binaries (/usr/lib/postgresql/*/bin or pg_ctl on PATH); \
                 run scripts/ensure-postgres.sh or set FRONTDESK_REQUIRE_POSTGRES=1 to make this a failure"
            );
            return None;
        };
        // SAFETY: geteuid(2) has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let run_as = root.then(|| "postgres".to_owned());
        let dir = tempfile::Builder::new().prefix("frontdesk-pg-private-").tempdir().unwrap();
        if let Some(user) = &run_as {
            check("chown the cluster directory", Command::new("chown").arg(user).arg(dir.path()).output());
        }
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let pg = PrivatePostgres { bin, dir, port, run_as };
        let data = pg.data();
        check(
            "initdb",
            pg.command("initdb")
                .arg("-D")
                .arg(&data)
                .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"])
                .output(),
        );
        pg.start_server();
        Some(pg)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn command(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        match &self.run_as {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.args(["-u", user, "--"]).arg(program);
                command
            }
            None => Command::new(program),
        }
    }

    /// The server's URL, on its `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Starts the server (again) on the same port and data, and waits until it accepts
    /// connections.
    pub fn start_server(&self) {
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -c unix_socket_directories='{}' -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        check(
            "pg_ctl start",
            self.command("pg_ctl")
                .arg("-D")
                .arg(self.data())
                .arg("-l")
                .arg(self.dir.path().join("server.log"))
                .args(["-w", "-t", "60", "-o", &options, "start"])
                .output(),
        );
    }

    /// Stops the server at once, as a crash or a lost host would (`pg_ctl stop -m immediate`:
    /// every connection is cut, nothing is shut down cleanly).
    pub fn stop_immediately(&self) {
        check(
            "pg_ctl stop",
            self.command("pg_ctl")
                .arg("-D")
                .arg(self.data())
                .args(["-m", "immediate", "-w", "-t", "60", "stop"])
                .output(),
        );
    }

    /// Whether something accepts TCP connections on the server's port.
    pub fn accepting(&self) -> bool {
        std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], self.port).into(), Duration::from_millis(200)).is_ok()
    }

    /// The server's log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = self.command("pg_ctl").arg("-D").arg(self.data()).args(["-m", "immediate", "-w", "stop"]).output();
    }
}
