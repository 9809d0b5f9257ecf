//! `m3 run`'s server flags: `--server NAME=COMMAND` (split like a shell splits words),
//! `--server-env NAME:KEY=VALUE`, `--server-cwd NAME=DIR`.

use std::path::PathBuf;

use m3_types::StdioServer;

use crate::failure::Failure;

/// Builds the server bindings, in the order the `--server` flags were given.
///
/// # Errors
/// A usage failure (exit 2) for a malformed flag, a duplicate server name, an unbalanced quote,
/// or an env/cwd flag naming a server that no `--server` defines.
pub(crate) fn parse_servers(
    servers: &[String],
    envs: &[String],
    cwds: &[String],
) -> Result<Vec<StdioServer>, Failure> {
    let mut bound: Vec<StdioServer> = Vec::new();
    for item in servers {
        let (name, command) = item.split_once('=').ok_or_else(|| {
            Failure::usage(format!("--server expects NAME=COMMAND, got '{item}'"))
        })?;
        let name = name.trim();
        if name.is_empty() {
            return Err(Failure::usage(format!(
                "--server '{item}': empty server name"
            )));
        }
        if bound.iter().any(|server| server.name == name) {
            return Err(Failure::usage(format!(
                "--server '{name}' is given more than once"
            )));
        }
        let words = shell_words::split(command).map_err(|error| {
            Failure::usage(format!(
                "--server {name}: cannot split the command: {error}"
            ))
        })?;
        let Some((program, args)) = words.split_first() else {
            return Err(Failure::usage(format!("--server {name}: empty command")));
        };
        bound.push(StdioServer::new(name, program.clone()).with_args(args.iter().cloned()));
    }
    for item in envs {
        let (name, assignment) = item.split_once(':').ok_or_else(|| {
            Failure::usage(format!("--server-env expects NAME:KEY=VALUE, got '{item}'"))
        })?;
        let (key, value) = assignment.split_once('=').ok_or_else(|| {
            Failure::usage(format!("--server-env expects NAME:KEY=VALUE, got '{item}'"))
        })?;
        if key.is_empty() {
            return Err(Failure::usage(format!("--server-env '{item}': empty KEY")));
        }
        let server = find(&mut bound, name, "--server-env")?;
        server.env.insert(key.to_owned(), value.to_owned());
    }
    for item in cwds {
        let (name, dir) = item.split_once('=').ok_or_else(|| {
            Failure::usage(format!("--server-cwd expects NAME=DIR, got '{item}'"))
        })?;
        let server = find(&mut bound, name, "--server-cwd")?;
        server.cwd = Some(PathBuf::from(dir));
    }
    Ok(bound)
}

fn find<'a>(
    bound: &'a mut [StdioServer],
    name: &str,
    flag: &str,
) -> Result<&'a mut StdioServer, Failure> {
    bound
        .iter_mut()
        .find(|server| server.name == name)
        .ok_or_else(|| Failure::usage(format!("{flag}: no --server named '{name}'")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn commands_are_split_like_a_shell() {
        let servers = parse_servers(
            &strings(&[
                r#"shipping=/usr/bin/m3 example-server shipping --era "2026-07-28""#,
                "py=python3 -c 'print(1, 2)'",
            ]),
            &strings(&["shipping:TOKEN=a=b", "py:EMPTY="]),
            &strings(&["py=/tmp/some dir"]),
        )
        .unwrap();
        assert_eq!(servers.len(), 2);
        assert_eq!(servers[0].name, "shipping");
        assert_eq!(servers[0].command, "/usr/bin/m3");
        assert_eq!(
            servers[0].args,
            ["example-server", "shipping", "--era", "2026-07-28"]
        );
        assert_eq!(servers[0].env["TOKEN"], "a=b");
        assert_eq!(servers[1].args, ["-c", "print(1, 2)"]);
        assert_eq!(servers[1].env["EMPTY"], "");
        assert_eq!(servers[1].cwd, Some(PathBuf::from("/tmp/some dir")));
    }

    #[test]
    fn malformed_flags_are_usage_errors() {
        let cases: [(&[&str], &[&str], &[&str]); 8] = [
            (&["shipping"], &[], &[]),
            (&["=cmd"], &[], &[]),
            (&["a="], &[], &[]),
            (&["a='unbalanced"], &[], &[]),
            (&["a=x", "a=y"], &[], &[]),
            (&["a=x"], &["b:K=V"], &[]),
            (&["a=x"], &["a:KV"], &[]),
            (&["a=x"], &[], &["b=/tmp"]),
        ];
        for (servers, envs, cwds) in cases {
            let failure =
                parse_servers(&strings(servers), &strings(envs), &strings(cwds)).unwrap_err();
            assert_eq!(failure.exit, 2, "{servers:?} {envs:?} {cwds:?}: {failure}");
        }
    }
}
