//! Compiles `proto/messenger.proto` (the only contract with RoboClaw clients) with the
//! `protoc` that `protoc-bin-vendored` ships, so nothing has to be installed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/messenger.proto");
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc);
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_with_config(config, &["proto/messenger.proto"], &["proto"])?;
    Ok(())
}
