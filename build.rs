//! Compiles the `frontdesk.v1` contract into prost messages and tonic stubs, and writes the
//! file descriptor set that server reflection serves.

use std::{env, path::PathBuf};

const PROTOS: &[&str] = &[
    "proto/frontdesk/v1/common.proto",
    "proto/frontdesk/v1/conversation.proto",
    "proto/frontdesk/v1/workflow.proto",
    "proto/frontdesk/v1/triage.proto",
    "proto/frontdesk/v1/investigation.proto",
    "proto/frontdesk/v1/research.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A vendored protoc keeps `cargo build` working on a machine without protobuf-compiler.
    if env::var_os("PROTOC").is_none() {
        // SAFETY: build scripts are single-threaded; nothing else reads the environment here.
        unsafe { env::set_var("PROTOC", protoc_bin_vendored::protoc_bin_path()?) };
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PROTOC");
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={proto}");
    }

    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .file_descriptor_set_path(out_dir.join("frontdesk_descriptor.bin"))
        .compile_protos(PROTOS, &["proto"])?;
    Ok(())
}
