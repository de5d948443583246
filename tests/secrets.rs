//! Secrets in the configuration never reach anything the server prints: the real
//! `frontdesk-server` binary, given a model API key and a SharePoint client secret (each once from
//! a file and once from the environment), logging at debug level in JSON with the full LLM call
//! log on, serves calls on several services (an error path included); then neither its stdout,
//! its stderr, its call log file, `--print-config` nor a configuration error holds a planted
//! value. The model is scripted (a test double that never sends the key anywhere): the point is
//! what the server writes, not what it sends.

mod common;

use std::{
    fs::File,
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use common::process::PLANTED_SECRET_VAR;
use frontdesk_api::v1;
use frontdesk_client::{Client, SendOptions, TriageOptions};
use tonic::Code;

/// A value found nowhere else: any occurrence in output is a leak.
fn planted(what: &str) -> String {
    format!("planted-{what}-{}", uuid::Uuid::new_v4().simple())
}

/// Where the secrets come from in one run.
enum Source {
    /// `model.api_key_file` and `client_secret_file` in the configuration file.
    Files,
    /// `FRONTDESK__MODEL__API_KEY` and `FRONTDESK__WORKFLOWS__INTAKE__SUBMITTER__CLIENT_SECRET`.
    Environment,
}

/// One run's directory, configuration file, environment and planted secrets.
struct Setup {
    dir: tempfile::TempDir,
    config: PathBuf,
    env: Vec<(String, String)>,
    secrets: Vec<String>,
}

impl Setup {
    fn new(source: Source) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let model_key = planted("model-key");
        let client_secret = planted("sharepoint-secret");
        let script = dir.path().join("script.json");
        std::fs::write(&script, include_str!("fixtures/demo-script.json")).unwrap();
        let mut model = String::new();
        let mut submitter = String::new();
        let mut env = Vec::new();
        match source {
            Source::Files => {
                let key_file = dir.path().join("model.key");
                std::fs::write(&key_file, format!("{model_key}\n")).unwrap();
                model = format!("api_key_file = {}\n", quoted(&key_file));
                let secret_file = dir.path().join("sharepoint.secret");
                std::fs::write(&secret_file, format!("{client_secret}\n")).unwrap();
                submitter = format!("client_secret_file = {}\n", quoted(&secret_file));
            }
            Source::Environment => {
                env.push(("FRONTDESK__MODEL__API_KEY".to_owned(), model_key.clone()));
                env.push(("FRONTDESK__WORKFLOWS__INTAKE__SUBMITTER__CLIENT_SECRET".to_owned(), client_secret.clone()));
            }
        }
        // SharePoint is configured (its submitter is built at start-up, with the secret) but
        // never reached: nothing here confirms a request.
        let config = format!(
            "[database]\nurl = {database}\n\n\
             [model]\nprovider = \"scripted\"\nscript_file = {script}\ncall_log = \"full\"\n\
             call_log_file = {call_log}\n{model}\n\
             [workflows.intake.submitter]\nkind = \"sharepoint\"\ntenant_id = \"contoso\"\n\
             client_id = \"frontdesk-test\"\nsite_id = \"site\"\nauthority_url = \"http://127.0.0.1:9\"\n\
             graph_url = \"http://127.0.0.1:9/v1.0\"\nteam_lists = {{ \"ops-change\" = \"LIST-1\" }}\n{submitter}",
            database = toml_string(&format!("sqlite://{}", dir.path().join("frontdesk.db").display())),
            script = quoted(&script),
            call_log = quoted(dir.path().join("llm-calls.jsonl")),
        );
        let config_path = dir.path().join("frontdesk.toml");
        std::fs::write(&config_path, config).unwrap();
        Setup { dir, config: config_path, env, secrets: vec![model_key, client_secret] }
    }

    /// The binary with this run's configuration and environment, and nothing inherited that
    /// could configure it otherwise.
    fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_frontdesk-server"));
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy();
            if name.starts_with("FRONTDESK__") || name == "RUST_LOG" || name == "OPENAI_API_KEY" {
                command.env_remove(name.as_ref());
            }
        }
        command.env_remove(PLANTED_SECRET_VAR).arg("--config").arg(&self.config).envs(self.env.iter().cloned());
        command
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Fails the test if any planted secret is in `text`.
    #[track_caller]
    fn assert_clean(&self, what: &str, text: &str) {
        for secret in &self.secrets {
            assert!(!text.contains(secret.as_str()), "a planted secret is in {what}:\n{text}");
        }
    }
}

/// A path as a TOML string.
fn quoted(path: impl AsRef<Path>) -> String {
    toml_string(&path.as_ref().display().to_string())
}

fn toml_string(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

/// The server, its stdout and stderr each going to a file of the run's directory.
struct Server {
    child: Child,
    addr: String,
    reader: std::thread::JoinHandle<()>,
}

impl Server {
    fn start(setup: &Setup) -> Server {
        let stdout = File::create(setup.path("stdout.log")).unwrap();
        let mut stderr_log = File::create(setup.path("stderr.log")).unwrap();
        let mut child = setup
            .command()
            .args(["--listen", "127.0.0.1:0", "--log-format", "json"])
            .env("FRONTDESK__LOG__FILTER", "debug")
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .expect("frontdesk-server starts");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                writeln!(stderr_log, "{line}").unwrap();
                if let Ok(value) = serde_json::from_str::<serde_json::Value>(&line) {
                    if value["message"] == "frontdesk-server listening" {
                        let _ = tx.send(value["addr"].as_str().unwrap_or_default().to_owned());
                    }
                }
            }
        });
        let addr = rx.recv_timeout(Duration::from_secs(60)).expect("server logs its address");
        Server { child, addr, reader }
    }

    /// SIGTERM, then waits for the process and for the last of its stderr.
    fn stop(mut self) {
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        assert!(status.success(), "graceful shutdown exits cleanly: {status:?}");
        self.reader.join().unwrap();
    }
}

/// Calls on the conversation, triage and workflow services, and calls that fail.
async fn drive(client: &Client) {
    let workflows = client.list_workflows().await.unwrap();
    assert!(workflows.iter().any(|w| w.name == "intake"), "{workflows:?}");

    let started = client.start_conversation("intake", Default::default()).await.unwrap();
    let id = started.conversation.unwrap().conversation_id;
    let (_, result) = client
        .send_message_and_wait(&id, "hello, a change to the ops list please", SendOptions::default())
        .await
        .unwrap();
    assert!(result.reply.unwrap().text.contains("scripted demo model"));
    client.get_conversation(&id).await.unwrap();

    let (_, _, triage) = client
        .triage_ticket_and_wait("CUST-001", "I was charged twice this month", TriageOptions::default())
        .await
        .unwrap();
    assert!(!triage.suggested_response.is_empty(), "{triage:?}");

    let calls = client
        .workflows()
        .list_llm_calls(v1::ListLlmCallsRequest { thread_id: id.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert!(!calls.calls.is_empty(), "the call log is on");

    let error = client.get_conversation("no-such-conversation").await.unwrap_err();
    assert_eq!(error.code(), Some(Code::NotFound), "{error:?}");
    let error =
        client.send_message_and_wait("no-such-conversation", "hello", SendOptions::default()).await.unwrap_err();
    assert_eq!(error.code(), Some(Code::NotFound), "{error:?}");
    let error = client.start_conversation("no-such-workflow", Default::default()).await.unwrap_err();
    assert!(error.code().is_some(), "{error:?}");
}

async fn served_calls_print_no_secret(source: Source) {
    let mut setup = Setup::new(source);
    // API keys are secrets too: the one the CLI makes (its stdout is the one place it may be
    // shown), and a wrong one a caller presents.
    let created = setup.command().args(["keys", "create", "--tenant", "acme", "--scopes", "*:admin"]).output().unwrap();
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let key = String::from_utf8(created.stdout).unwrap().trim().to_owned();
    setup.assert_clean("keys create's stderr", &String::from_utf8_lossy(&created.stderr));
    // The secret is base64url, which may itself hold '_': split off the prefix and the id only.
    let mut parts = key.splitn(3, '_');
    let (key_id, secret) = (parts.nth(1).unwrap().to_owned(), parts.next().unwrap().to_owned());
    assert_eq!(secret.len(), 43, "{key}");
    let wrong = format!("fdk_{key_id}_{}", "B".repeat(43));
    setup.secrets.extend([key.clone(), secret, wrong.clone()]);
    setup.env.push(("FRONTDESK__AUTH__MODE".into(), "keys".into()));

    let server = Server::start(&setup);
    let url = format!("http://{}", server.addr);
    drive(&Client::builder(url.as_str()).api_key(key.as_str()).connect().await.unwrap()).await;
    let refused = Client::builder(url.as_str()).api_key(wrong.as_str()).connect().await.unwrap();
    let error = refused.list_workflows().await.unwrap_err();
    assert_eq!(error.code(), Some(Code::Unauthenticated), "{error:?}");
    server.stop();
    let keys = setup.command().args(["keys", "list"]).output().unwrap();
    assert!(String::from_utf8_lossy(&keys.stdout).contains(&key_id), "the listing shows the key's id");
    setup.assert_clean("keys list", &String::from_utf8_lossy(&keys.stdout));

    let stderr = std::fs::read_to_string(setup.path("stderr.log")).unwrap();
    assert!(stderr.contains("\"level\":\"DEBUG\""), "debug logging is on:\n{stderr}");
    setup.assert_clean("the server's stderr", &stderr);
    setup.assert_clean("the server's stdout", &std::fs::read_to_string(setup.path("stdout.log")).unwrap());
    let call_log = std::fs::read_to_string(setup.path("llm-calls.jsonl")).unwrap();
    assert!(call_log.contains("I was charged twice this month"), "the call log is full:\n{call_log}");
    setup.assert_clean("the call log file", &call_log);

    let printed = setup.command().arg("--print-config").output().unwrap();
    let stdout = String::from_utf8(printed.stdout).unwrap();
    assert!(printed.status.success(), "{}", String::from_utf8_lossy(&printed.stderr));
    assert!(stdout.contains("kind = \"sharepoint\""), "{stdout}");
    setup.assert_clean("--print-config", &stdout);
    setup.assert_clean("--print-config's stderr", &String::from_utf8_lossy(&printed.stderr));
}

#[tokio::test]
async fn secrets_from_files_are_never_printed() {
    served_calls_print_no_secret(Source::Files).await;
}

#[tokio::test]
async fn secrets_from_the_environment_are_never_printed() {
    served_calls_print_no_secret(Source::Environment).await;
}

/// `--print-config` shows where a key file is and that secrets are set, never their values.
#[test]
fn print_config_shows_key_files_and_redacts_keys() {
    let files = Setup::new(Source::Files);
    let printed = String::from_utf8(files.command().arg("--print-config").output().unwrap().stdout).unwrap();
    assert!(printed.contains(&format!("api_key_file = {}", quoted(files.path("model.key")))), "{printed}");
    assert!(
        printed.contains(&format!("client_secret_file = {}", quoted(files.path("sharepoint.secret")))),
        "{printed}"
    );
    files.assert_clean("--print-config", &printed);

    let env = Setup::new(Source::Environment);
    let printed = String::from_utf8(env.command().arg("--print-config").output().unwrap().stdout).unwrap();
    assert!(printed.contains("api_key = \"<redacted>\""), "{printed}");
    assert!(printed.contains("client_secret = \"<redacted>\""), "{printed}");
    env.assert_clean("--print-config", &printed);
}

/// A configuration error about a secret names the settings, never the secret: a key file and a
/// key in the environment both, and a key file that cannot be read.
#[test]
fn configuration_errors_name_secret_settings_without_their_values() {
    let setup = Setup::new(Source::Files);
    let other_key = planted("other-model-key");
    let output = setup.command().env("FRONTDESK__MODEL__API_KEY", &other_key).arg("--print-config").output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("model.api_key_file")
            && stderr.contains("model.api_key is set too (from environment variable FRONTDESK__MODEL__API_KEY)"),
        "{stderr}"
    );
    setup.assert_clean("the error", &stderr);
    assert!(!stderr.contains(&other_key), "{stderr}");
    assert!(output.stdout.is_empty());

    std::fs::remove_file(setup.path("model.key")).unwrap();
    let output = setup.command().output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("model.api_key_file") && stderr.contains("cannot read"), "{stderr}");
    setup.assert_clean("the error", &stderr);
}
