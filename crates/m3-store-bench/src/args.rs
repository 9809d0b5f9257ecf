//! The benchmark's command line: its flags, their defaults, and the usage line.

use std::path::PathBuf;

const USAGE: &str = "usage: m3-store-bench [--db postgres://...] [--rounds N] [--full-rounds N] [--dir DIR] [--concurrency 1,8,64|none] [--repeat N]";

/// The command line.
pub(crate) struct Args {
    pub(crate) db: Option<String>,
    pub(crate) rounds: usize,
    pub(crate) remove_dir: bool,
    pub(crate) full_rounds: usize,
    pub(crate) dir: PathBuf,
    pub(crate) concurrency: Vec<usize>,
    /// PostgreSQL: how often each subject pair (m3-rs, bare sqlx) runs, alternating.
    pub(crate) repeat: usize,
}

pub(crate) fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        db: None,
        rounds: 2000,
        remove_dir: true,
        full_rounds: 500,
        dir: std::env::temp_dir().join(format!("m3-store-bench-{}", m3_types::new_id())),
        concurrency: vec![1, 8, 64],
        repeat: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--db" => {
                let url = value()?;
                if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
                    return Err(format!(
                        "--db takes a postgres:// URL (SQLite runs without --db), not {url}"
                    ));
                }
                args.db = Some(url);
            }
            "--rounds" => args.rounds = value()?.parse().map_err(|e| format!("--rounds: {e}"))?,
            "--full-rounds" => {
                args.full_rounds = value()?
                    .parse()
                    .map_err(|e| format!("--full-rounds: {e}"))?;
            }
            "--dir" => {
                args.dir = PathBuf::from(value()?);
                args.remove_dir = false;
            }
            "--concurrency" => {
                let list = value()?;
                args.concurrency = list
                    .split(',')
                    .filter(|n| !n.trim().is_empty() && *n != "none")
                    .map(|n| n.trim().parse().map_err(|e| format!("--concurrency: {e}")))
                    .collect::<Result<_, _>>()?;
            }
            "--repeat" => {
                args.repeat = value()?
                    .parse::<usize>()
                    .map_err(|e| format!("--repeat: {e}"))?
                    .max(1);
            }
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    Ok(args)
}
