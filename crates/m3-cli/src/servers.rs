//! `m3 run`'s server flags: `--server NAME=COMMAND` (split like a shell splits words) or
//! `--server NAME=http://HOST:PORT/PATH` (or `https://`), `--server-env NAME:KEY=VALUE`,
//! `--server-cwd NAME=DIR` (stdio), `--server-header NAME:KEY=VALUE` and
//! `--server-trust NAME=LEVEL` and `--server-oauth NAME:KEY=VALUE` (HTTP), and
//! `--server-era NAME=ERA` (either kind).

use std::path::PathBuf;

use m3_types::{HttpServer, OAuthSettings, ServerBinding, ServerEra, ServerTrust, StdioServer};

use crate::failure::Failure;

/// The server flags of `m3 run`, as given.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServerFlags<'a> {
    pub(crate) servers: &'a [String],
    pub(crate) envs: &'a [String],
    pub(crate) cwds: &'a [String],
    pub(crate) headers: &'a [String],
    pub(crate) trusts: &'a [String],
    pub(crate) eras: &'a [String],
    pub(crate) oauth: &'a [String],
}

/// Builds the server bindings, in the order the `--server` flags were given.
///
/// # Errors
/// A usage failure (exit 2) for a malformed flag, a duplicate server name, an unbalanced quote,
/// an unknown trust level or era, or an env/cwd/header/trust/era flag naming a server that no `--server`
/// defines or that is of the other kind.
pub(crate) fn parse_servers(flags: ServerFlags<'_>) -> Result<Vec<ServerBinding>, Failure> {
    let mut bound: Vec<ServerBinding> = Vec::new();
    for item in flags.servers {
        let (name, command) = item.split_once('=').ok_or_else(|| {
            Failure::usage(format!(
                "--server expects NAME=COMMAND or NAME=URL, got '{item}'"
            ))
        })?;
        let name = name.trim();
        if name.is_empty() {
            return Err(Failure::usage(format!(
                "--server '{item}': empty server name"
            )));
        }
        if bound.iter().any(|server| server.name() == name) {
            return Err(Failure::usage(format!(
                "--server '{name}' is given more than once"
            )));
        }
        let target = command.trim();
        if target.starts_with("http://") || target.starts_with("https://") {
            bound.push(HttpServer::new(name, target).into());
            continue;
        }
        let words = shell_words::split(command).map_err(|error| {
            Failure::usage(format!(
                "--server {name}: cannot split the command: {error}"
            ))
        })?;
        let Some((program, args)) = words.split_first() else {
            return Err(Failure::usage(format!("--server {name}: empty command")));
        };
        bound.push(
            StdioServer::new(name, program.clone())
                .with_args(args.iter().cloned())
                .into(),
        );
    }
    for item in flags.envs {
        let (name, key, value) = assignment(item, "--server-env")?;
        stdio(&mut bound, name, "--server-env")?
            .env
            .insert(key.to_owned(), value.to_owned());
    }
    for item in flags.cwds {
        let (name, dir) = item.split_once('=').ok_or_else(|| {
            Failure::usage(format!("--server-cwd expects NAME=DIR, got '{item}'"))
        })?;
        stdio(&mut bound, name, "--server-cwd")?.cwd = Some(PathBuf::from(dir));
    }
    for item in flags.headers {
        let (name, key, value) = assignment(item, "--server-header")?;
        http(&mut bound, name, "--server-header")?
            .headers
            .insert(key.to_owned(), value.to_owned());
    }
    for item in flags.trusts {
        let (name, level) = item.split_once('=').ok_or_else(|| {
            Failure::usage(format!("--server-trust expects NAME=LEVEL, got '{item}'"))
        })?;
        let trust: ServerTrust = level.parse().map_err(|error: m3_types::Error| {
            Failure::usage(format!("--server-trust {name}: {}", error.message()))
        })?;
        http(&mut bound, name, "--server-trust")?.trust = trust;
    }
    for item in flags.eras {
        let (name, era) = item.split_once('=').ok_or_else(|| {
            Failure::usage(format!("--server-era expects NAME=ERA, got '{item}'"))
        })?;
        let era: ServerEra = era.parse().map_err(|error: m3_types::Error| {
            Failure::usage(format!("--server-era {name}: {}", error.message()))
        })?;
        match find(&mut bound, name, "--server-era")? {
            ServerBinding::Stdio(server) => server.era = era,
            ServerBinding::Http(server) => server.era = era,
            other => {
                return Err(Failure::usage(format!(
                    "--server-era: server '{}' cannot be pinned",
                    other.name()
                )));
            }
        }
    }
    for item in flags.oauth {
        let (name, key, value) = assignment(item, "--server-oauth")?;
        let server = http(&mut bound, name, "--server-oauth")?;
        oauth_setting(server.oauth.get_or_insert_default(), key, value)
            .map_err(|why| Failure::usage(format!("--server-oauth {name}:{key}: {why}")))?;
    }
    Ok(bound)
}

/// Sets one `--server-oauth` KEY; why not, for a bad key or value.
fn oauth_setting(settings: &mut OAuthSettings, key: &str, value: &str) -> Result<(), String> {
    match key {
        "grant" => {
            settings.grant = value
                .parse()
                .map_err(|e: m3_types::Error| e.message().to_owned())?
        }
        "client_id" => settings.client_id = Some(value.to_owned()),
        "client_secret_env" => settings.client_secret_env = Some(value.to_owned()),
        "client_secret_file" => settings.client_secret_file = Some(value.to_owned()),
        "client_metadata_url" => settings.client_metadata_url = Some(value.to_owned()),
        "scope" => settings
            .scopes
            .extend(value.split_whitespace().map(str::to_owned)),
        "callback_port" => {
            settings.callback_port =
                Some(value.parse().map_err(|_| "not a port number".to_owned())?);
        }
        other => {
            return Err(format!(
                "unknown key '{other}' (grant, client_id, client_secret_env, client_secret_file, client_metadata_url, scope, callback_port)"
            ));
        }
    }
    Ok(())
}

/// `NAME:KEY=VALUE`, with a non-empty KEY.
fn assignment<'a>(item: &'a str, flag: &str) -> Result<(&'a str, &'a str, &'a str), Failure> {
    let malformed = || Failure::usage(format!("{flag} expects NAME:KEY=VALUE, got '{item}'"));
    let (name, rest) = item.split_once(':').ok_or_else(malformed)?;
    let (key, value) = rest.split_once('=').ok_or_else(malformed)?;
    if key.is_empty() {
        return Err(Failure::usage(format!("{flag} '{item}': empty KEY")));
    }
    Ok((name, key, value))
}

fn find<'a>(
    bound: &'a mut [ServerBinding],
    name: &str,
    flag: &str,
) -> Result<&'a mut ServerBinding, Failure> {
    bound
        .iter_mut()
        .find(|server| server.name() == name)
        .ok_or_else(|| Failure::usage(format!("{flag}: no --server named '{name}'")))
}

fn stdio<'a>(
    bound: &'a mut [ServerBinding],
    name: &str,
    flag: &str,
) -> Result<&'a mut StdioServer, Failure> {
    match find(bound, name, flag)? {
        ServerBinding::Stdio(server) => Ok(server),
        _ => Err(Failure::usage(format!(
            "{flag}: server '{name}' is an HTTP endpoint; {flag} applies to command servers"
        ))),
    }
}

fn http<'a>(
    bound: &'a mut [ServerBinding],
    name: &str,
    flag: &str,
) -> Result<&'a mut HttpServer, Failure> {
    match find(bound, name, flag)? {
        ServerBinding::Http(server) => Ok(server),
        _ => Err(Failure::usage(format!(
            "{flag}: server '{name}' is a command; {flag} applies to http:// and https:// servers"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    fn parse(
        servers: &[&str],
        envs: &[&str],
        cwds: &[&str],
        headers: &[&str],
        trusts: &[&str],
    ) -> Result<Vec<ServerBinding>, Failure> {
        let (servers, envs, cwds, headers, trusts) = (
            strings(servers),
            strings(envs),
            strings(cwds),
            strings(headers),
            strings(trusts),
        );
        parse_servers(ServerFlags {
            servers: &servers,
            envs: &envs,
            cwds: &cwds,
            headers: &headers,
            trusts: &trusts,
            eras: &[],
            oauth: &[],
        })
    }

    #[test]
    fn commands_are_split_like_a_shell() {
        let servers = parse(
            &[
                r#"shipping=/usr/bin/m3 example-server shipping --era "2026-07-28""#,
                "py=python3 -c 'print(1, 2)'",
            ],
            &["shipping:TOKEN=a=b", "py:EMPTY="],
            &["py=/tmp/some dir"],
            &[],
            &[],
        )
        .unwrap();
        assert_eq!(servers.len(), 2);
        let shipping = servers[0].as_stdio().unwrap();
        assert_eq!(shipping.name, "shipping");
        assert_eq!(shipping.command, "/usr/bin/m3");
        assert_eq!(
            shipping.args,
            ["example-server", "shipping", "--era", "2026-07-28"]
        );
        assert_eq!(shipping.env["TOKEN"], "a=b");
        let py = servers[1].as_stdio().unwrap();
        assert_eq!(py.args, ["-c", "print(1, 2)"]);
        assert_eq!(py.env["EMPTY"], "");
        assert_eq!(py.cwd, Some(PathBuf::from("/tmp/some dir")));
    }

    #[test]
    fn urls_make_http_bindings_with_headers_and_trust() {
        let servers = parse(
            &[
                "shipping=http://127.0.0.1:8080/mcp",
                "remote=https://mcp.example.com/mcp",
            ],
            &[],
            &[],
            &["remote:Authorization=Bearer ${TOKEN}", "remote:X-A=b=c"],
            &["shipping=loopback"],
        )
        .unwrap();
        let shipping = servers[0].as_http().unwrap();
        assert_eq!(shipping.url, "http://127.0.0.1:8080/mcp");
        assert_eq!(shipping.trust, ServerTrust::Loopback);
        let remote = servers[1].as_http().unwrap();
        assert_eq!(remote.trust, ServerTrust::Untrusted);
        assert_eq!(remote.headers["Authorization"], "Bearer ${TOKEN}");
        assert_eq!(remote.headers["X-A"], "b=c");
    }

    #[test]
    fn eras_pin_either_kind_of_server_and_bad_ones_are_usage_errors() {
        let servers = strings(&["py=python3 server.py", "h=http://127.0.0.1:1/mcp"]);
        let with_eras = |eras: &[&str]| {
            let eras = strings(eras);
            parse_servers(ServerFlags {
                servers: &servers,
                envs: &[],
                cwds: &[],
                headers: &[],
                trusts: &[],
                eras: &eras,
                oauth: &[],
            })
        };
        let bound = with_eras(&["py=2025-11-25", "h=2025-06-18"]).unwrap();
        assert_eq!(bound[0].era(), ServerEra::V2025_11_25);
        assert_eq!(bound[1].era(), ServerEra::V2025_06_18);
        assert_eq!(with_eras(&[]).unwrap()[0].era(), ServerEra::Auto);
        for bad in ["py", "py=2024-11-05", "other=auto"] {
            let failure = with_eras(&[bad]).unwrap_err();
            assert_eq!(failure.exit(), 2, "{bad}: {failure}");
        }
        let failure = with_eras(&["py=modern"]).unwrap_err();
        assert!(failure.to_string().contains("2025-11-25"), "{failure}");
    }

    #[test]
    fn malformed_flags_are_usage_errors() {
        type Case<'a> = (
            &'a [&'a str],
            &'a [&'a str],
            &'a [&'a str],
            &'a [&'a str],
            &'a [&'a str],
        );
        let cases: [Case<'_>; 14] = [
            (&["shipping"], &[], &[], &[], &[]),
            (&["=cmd"], &[], &[], &[], &[]),
            (&["a="], &[], &[], &[], &[]),
            (&["a='unbalanced"], &[], &[], &[], &[]),
            (&["a=x", "a=y"], &[], &[], &[], &[]),
            (&["a=x"], &["b:K=V"], &[], &[], &[]),
            (&["a=x"], &["a:KV"], &[], &[], &[]),
            (&["a=x"], &[], &["b=/tmp"], &[], &[]),
            (&["a=x"], &[], &[], &["a:K=V"], &[]),
            (&["a=x"], &[], &[], &[], &["a=loopback"]),
            (&["h=http://127.0.0.1:1/"], &["h:K=V"], &[], &[], &[]),
            (&["h=http://127.0.0.1:1/"], &[], &["h=/tmp"], &[], &[]),
            (&["h=http://127.0.0.1:1/"], &[], &[], &[], &["h=everything"]),
            (&["h=http://127.0.0.1:1/"], &[], &[], &["h:=V"], &[]),
        ];
        for (servers, envs, cwds, headers, trusts) in cases {
            let failure = parse(servers, envs, cwds, headers, trusts).unwrap_err();
            assert_eq!(
                failure.exit(),
                2,
                "{servers:?} {envs:?} {cwds:?} {headers:?} {trusts:?}: {failure}"
            );
        }
    }

    #[test]
    fn oauth_settings_build_up_key_by_key_and_bad_ones_are_usage_errors() {
        let servers = strings(&["py=python3 server.py", "h=http://127.0.0.1:1/mcp"]);
        let with_oauth = |items: &[&str]| {
            let items = strings(items);
            parse_servers(ServerFlags {
                servers: &servers,
                envs: &[],
                cwds: &[],
                headers: &[],
                trusts: &[],
                eras: &[],
                oauth: &items,
            })
        };
        let bound = with_oauth(&[
            "h:grant=client_credentials",
            "h:client_id=worker",
            "h:client_secret_env=SECRET",
            "h:scope=a b",
            "h:scope=c",
        ])
        .unwrap();
        let ServerBinding::Http(remote) = &bound[1] else {
            panic!("{bound:?}")
        };
        let oauth = remote.oauth.as_ref().unwrap();
        assert_eq!(oauth.grant, m3_types::OAuthGrant::ClientCredentials);
        assert_eq!(oauth.client_id.as_deref(), Some("worker"));
        assert_eq!(oauth.scopes, ["a", "b", "c"]);
        for bad in [
            "h:grant=implicit",
            "h:secret=x",
            "py:client_id=x",
            "h:callback_port=x",
        ] {
            assert_eq!(with_oauth(&[bad]).unwrap_err().exit(), 2, "{bad}");
        }
    }
}
