//! `memoryd-codegen FDS OUT_DIR`: generate prost messages and tonic clients for every file
//! of the FileDescriptorSet FDS (built by scripts/gen_proto.py) into OUT_DIR.
use prost::Message;

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: memoryd-codegen FDS OUT_DIR");
        std::process::exit(2);
    }
    let bytes = std::fs::read(&args[1])?;
    let fds = prost_types::FileDescriptorSet::decode(bytes.as_slice())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    tonic_prost_build::configure()
        .build_server(false)
        .build_client(true)
        .emit_rerun_if_changed(false)
        .out_dir(&args[2])
        .compile_fds(fds)
}
