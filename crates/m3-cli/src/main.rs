//! `m3`: the m3-rs command line.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("demo") => {
            eprintln!("m3 demo: not yet available (the runtime has not landed yet)");
            std::process::ExitCode::from(1)
        }
        _ => {
            eprintln!("usage: m3 <command>");
            std::process::ExitCode::from(2)
        }
    }
}
