//! `m3`: the m3-rs command line (see `m3 --help` and docs/cli.md).
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    m3_cli::main()
}
