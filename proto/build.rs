//! Compiles proto/rkcm/informer/v1/informer.proto with protox (pure Rust, no system
//! protoc), twice:
//! - `types/`: the messages, the client and the file descriptor set served by reflection;
//! - `server/`: the server trait, whose Watch answers with `crate::SharedWatchEvent`, an
//!   event whose object JSON is serialised once and shared by every subscriber.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "rkcm/informer/v1/informer.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["."])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("informer_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;

    let types = out.join("types");
    let server = out.join("server");
    std::fs::create_dir_all(&types)?;
    std::fs::create_dir_all(&server)?;
    tonic_prost_build::configure()
        .build_server(false)
        .build_client(true)
        .out_dir(&types)
        .compile_fds(fds.clone())?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(false)
        .extern_path(".rkcm.informer.v1", "crate::v1")
        .extern_path(".rkcm.informer.v1.WatchEvent", "crate::SharedWatchEvent")
        .out_dir(&server)
        .compile_fds(fds)?;
    Ok(())
}
