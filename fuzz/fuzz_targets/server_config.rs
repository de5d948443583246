//! The server's configuration loader (`Config::load`: defaults, then a TOML file, then the
//! environment) from an arbitrary file: never panics; a refusal lists at least one problem, each
//! naming a setting; an accepted file's configuration prints (`Config::to_toml`, what
//! `--print-config` writes) as TOML that loads back to the same configuration.
//!
//! `Config::load` reads a path, so each input is written to one file per fuzzing process.

#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use frontdesk_server::config::{Config, ConfigError, Overrides};
use libfuzzer_sys::fuzz_target;

fn path(name: &str) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("frontdesk-fuzz-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        dir
    });
    dir.join(name)
}

fn load(file: &std::path::Path) -> Result<Config, ConfigError> {
    Config::load(Some(file), &Overrides::default())
}

fuzz_target!(|data: &[u8]| {
    let input = path("input.toml");
    std::fs::write(&input, data).expect("write the input");
    match load(&input) {
        Ok(config) => {
            let printed = config.to_toml();
            let again_path = path("printed.toml");
            std::fs::write(&again_path, &printed).expect("write the printed configuration");
            let again = match load(&again_path) {
                Ok(again) => again,
                Err(e) => panic!("the printed configuration does not load back: {e}\n--- printed:\n{printed}"),
            };
            assert_eq!(again.to_toml(), printed, "printing is stable across a load");
        }
        Err(ConfigError::Invalid(problems)) => {
            assert!(!problems.is_empty(), "a refusal names a problem");
            for problem in &problems {
                let _ = problem.to_string();
            }
        }
        Err(ConfigError::MissingFile(file)) => panic!("the file {} was just written", file.display()),
    }
});
