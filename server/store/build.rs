// `sqlx::migrate!` embeds the migration files it finds when the crate is compiled, and Cargo
// tracks the files it embedded but not the directories: without this, a migration added to
// either directory would be missing from an incremental build.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
