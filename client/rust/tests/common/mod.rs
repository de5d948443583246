//! The real server the CLI suites run against: in process, on 127.0.0.1:0, on a fresh SQLite
//! database, with a scripted model; and the CLI binary run against it.

// Each suite includes this module and uses only part of it.
#![allow(dead_code)]

use std::{
    process::{Command, Stdio},
    sync::Arc,
};

use frontdesk_client::Client;
use frontdesk_llm::{ScriptedModel, ScriptedReply};
use frontdesk_server::{
    app::{App, Overrides, RunningServer},
    config::Config,
};

pub struct Server {
    pub server: RunningServer,
    pub model: Arc<ScriptedModel>,
    _dir: tempfile::TempDir,
}

impl Server {
    /// A server whose model answers only what a test scripts (`script`).
    pub async fn start() -> Self {
        Self::with_model(ScriptedModel::new("scripted-test")).await
    }

    pub async fn with_model(model: ScriptedModel) -> Self {
        Self::with_config(model, |_| {}).await
    }

    /// A server with `model` and the default configuration as `configure` changes it (the
    /// database aside).
    pub async fn with_config(model: ScriptedModel, configure: impl FnOnce(&mut Config)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        configure(&mut config);
        config.database.url = format!("sqlite://{}/frontdesk.db", dir.path().display());
        let model = Arc::new(model);
        let app = App::build(config, Overrides { model: Some(model.clone()), ..Overrides::default() }).await.unwrap();
        let server = app.serve_on(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap()).await.unwrap();
        Server { server, model, _dir: dir }
    }

    /// Queues the model's replies for the next calls, each pinned to the purpose it answers.
    pub fn script(&self, replies: &[(&str, serde_json::Value)]) {
        for (purpose, reply) in replies {
            self.model.push_reply(ScriptedReply::json(reply).for_purpose(*purpose));
        }
    }

    /// Runs the CLI against this server: (success, stdout, stderr). With `SHOW_CLI_OUTPUT` set
    /// it also prints the command and what it printed.
    pub async fn cli(&self, args: &[&str]) -> (bool, String, String) {
        let addr = self.server.addr;
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        tokio::task::spawn_blocking(move || {
            let out = Command::new(env!("CARGO_BIN_EXE_frontdesk"))
                .arg("--server")
                .arg(format!("http://{addr}"))
                .args(&args)
                .env("NO_COLOR", "1")
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let (stdout, stderr) =
                (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
            if std::env::var_os("SHOW_CLI_OUTPUT").is_some() {
                println!("$ frontdesk {}\n{stdout}{stderr}", args.join(" "));
            }
            (out.status.success(), stdout, stderr)
        })
        .await
        .unwrap()
    }

    pub async fn client(&self) -> Client {
        Client::connect(format!("http://{}", self.server.addr)).await.unwrap()
    }
}
