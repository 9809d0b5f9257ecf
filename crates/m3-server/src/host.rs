//! Which `Host` values the server answers, and the origin a browser must show
//! for a state-changing request.
//!
//! Without a token the server trusts whoever can reach a loopback port, so it
//! must also know the request was *meant* for loopback: a page on
//! `http://evil.example:P` whose name the attacker re-points at 127.0.0.1 (DNS
//! rebinding) reaches the port with `Host: evil.example:P` and is, to the
//! browser, same-origin with itself. Refusing every `Host` that is not a
//! loopback name (or one the operator allowed) closes that door.

use std::net::IpAddr;
use std::str::FromStr;

use axum::http::uri::{Authority, Scheme};
use axum::http::{HeaderMap, Uri, header};
use m3_types::{Error, Result};

/// One `Host` value the server answers besides the loopback names, as given to
/// [`ServerBuilder::allowed_host`](crate::ServerBuilder::allowed_host) or
/// `m3 serve --allowed-host`: `NAME` (any port) or `NAME:PORT`.
///
/// ```
/// let any_port: m3_server::AllowedHost = "m3.internal".parse()?;
/// let one_port: m3_server::AllowedHost = "m3.internal:8443".parse()?;
/// assert!("http://m3.internal/".parse::<m3_server::AllowedHost>().is_err());
/// # let _ = (any_port, one_port);
/// # Ok::<(), m3_types::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHost {
    name: String,
    port: Option<u16>,
}

impl FromStr for AllowedHost {
    type Err = Error;

    /// # Errors
    /// `invalid_argument` when `text` is not a bare `NAME` or `NAME:PORT`
    /// (no scheme, path or user).
    fn from_str(text: &str) -> Result<Self> {
        let refuse = || {
            Error::model_validation(format!(
                "'{text}' is not a host name: give NAME or NAME:PORT (no scheme, path or user)"
            ))
            .with_detail("allowed_host", text)
        };
        let authority = Authority::from_str(text).map_err(|_| refuse())?;
        if text.is_empty() || text.contains(['@', '/']) || authority.host().is_empty() {
            return Err(refuse());
        }
        Ok(Self {
            name: normalized_name(authority.host()),
            port: authority.port_u16(),
        })
    }
}

/// The host rule of one server.
#[derive(Debug, Clone)]
pub(crate) struct HostPolicy {
    /// Whether `Host` is checked at all (without a token, or when hosts were
    /// allowed explicitly).
    pub(crate) enforced: bool,
    /// Names allowed besides loopback.
    pub(crate) allowed: Vec<AllowedHost>,
    /// The scheme browsers reach this server with (`http` unless a TLS proxy
    /// terminates in front of it).
    pub(crate) scheme: Scheme,
}

impl HostPolicy {
    /// True when the request names a host this server answers: the URI's
    /// authority (absolute-form requests) and the `Host` header must both be
    /// allowed when present, and one of them must be.
    pub(crate) fn admits(&self, uri: &Uri, headers: &HeaderMap) -> bool {
        if !self.enforced {
            return true;
        }
        let from_uri = uri.authority().map(Authority::as_str);
        let from_header = headers.get(header::HOST).map(|v| v.to_str().ok());
        match (from_uri, from_header) {
            (None, None) => false,
            (Some(uri_host), None) => self.names(uri_host),
            (uri_host, Some(header_host)) => {
                header_host.is_some_and(|h| self.names(h)) && uri_host.is_none_or(|h| self.names(h))
            }
        }
    }

    /// Whether `value` (`NAME[:PORT]`) is loopback or allowed.
    fn names(&self, value: &str) -> bool {
        let Ok(authority) = Authority::from_str(value) else {
            return false;
        };
        if value.contains('@') {
            return false;
        }
        let name = normalized_name(authority.host());
        let port = authority.port_u16();
        is_loopback(&name)
            || self
                .allowed
                .iter()
                .any(|allowed| allowed.name == name && allowed.port.is_none_or(|p| Some(p) == port))
    }

    /// True when a state-changing request may proceed: no `Origin` (a
    /// program, not a page), or one equal to this server's own origin, scheme
    /// included, or `Origin: null` with `Sec-Fetch-Site: same-origin` (a plain form post
    /// of the page itself); `Sec-Fetch-Site: cross-site` / `same-site` are refused.
    pub(crate) fn same_origin(&self, uri: &Uri, headers: &HeaderMap) -> bool {
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        if text("sec-fetch-site").is_some_and(|site| site == "cross-site" || site == "same-site") {
            return false;
        }
        let Some(origin) = headers.get(header::ORIGIN) else {
            return true;
        };
        let Ok(origin) = origin.to_str() else {
            return false;
        };
        if origin == "null" {
            // The page is served with `Referrer-Policy: no-referrer`, so a browser sends
            // `Origin: null` with a plain form post (no script) even to the page's own
            // server (Fetch standard, "append a request `Origin` header"); its own
            // `Sec-Fetch-Site`, which no page can set, then says whether the post came
            // from this server's page. Any other `null` (a sandboxed frame, a file) stays
            // refused.
            return text("sec-fetch-site") == Some("same-origin");
        }
        let host = uri
            .authority()
            .map(Authority::as_str)
            .or_else(|| text(header::HOST.as_str()));
        host.is_some_and(|host| origin.eq_ignore_ascii_case(&format!("{}://{host}", self.scheme)))
    }
}

/// Lower case, without the brackets of an IPv6 literal.
fn normalized_name(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

/// `localhost` and loopback addresses: names no DNS answer can re-point.
fn is_loopback(name: &str) -> bool {
    name == "localhost" || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allowed: &[&str]) -> HostPolicy {
        HostPolicy {
            enforced: true,
            allowed: allowed.iter().map(|h| h.parse().unwrap()).collect(),
            scheme: Scheme::HTTP,
        }
    }

    fn with(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(
                header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        headers
    }

    #[test]
    fn only_loopback_and_allowed_hosts_are_admitted() {
        let policy = policy(&["m3.test", "pinned.test:9000"]);
        let path: Uri = "/api/v1/rounds".parse().unwrap();
        for good in [
            "127.0.0.1:7878",
            "localhost:7878",
            "LOCALHOST",
            "[::1]:7878",
            "127.0.0.2",
            "m3.test:1",
            "pinned.test:9000",
        ] {
            assert!(policy.admits(&path, &with(&[("host", good)])), "{good}");
        }
        for bad in [
            "evil.example:7878",
            "localhost.:7878",
            "pinned.test:9001",
            "pinned.test",
            "10.0.0.1:7878",
            "user@127.0.0.1",
            "",
        ] {
            assert!(!policy.admits(&path, &with(&[("host", bad)])), "{bad}");
        }
        assert!(!policy.admits(&path, &HeaderMap::new()), "no host at all");
        let absolute: Uri = "http://evil.example:7878/api/v1/rounds".parse().unwrap();
        assert!(
            !policy.admits(&absolute, &with(&[("host", "127.0.0.1:7878")])),
            "an absolute-form URI names the host too"
        );
    }

    #[test]
    fn origins_are_compared_with_scheme_and_host() {
        let policy = policy(&[]);
        let path: Uri = "/".parse().unwrap();
        let host = ("host", "127.0.0.1:7878");
        assert!(policy.same_origin(&path, &with(&[host])));
        assert!(policy.same_origin(&path, &with(&[host, ("origin", "http://127.0.0.1:7878")])));
        for bad in [
            "https://127.0.0.1:7878",
            "http://evil.test",
            "http://127.0.0.1:7879",
            "null",
        ] {
            assert!(
                !policy.same_origin(&path, &with(&[host, ("origin", bad)])),
                "{bad}"
            );
        }
        // A plain form post of the page itself: `Origin: null` (no-referrer policy), but
        // the browser says it is same-origin; without that word `null` is refused.
        assert!(policy.same_origin(
            &path,
            &with(&[host, ("origin", "null"), ("sec-fetch-site", "same-origin")])
        ));
        assert!(!policy.same_origin(
            &path,
            &with(&[host, ("origin", "null"), ("sec-fetch-site", "none")])
        ));
        let proxied = HostPolicy {
            scheme: Scheme::HTTPS,
            ..policy
        };
        assert!(proxied.same_origin(&path, &with(&[host, ("origin", "https://127.0.0.1:7878")])));
    }

    #[test]
    fn allowed_hosts_parse_strictly() {
        assert_eq!(
            "M3.Test:80".parse::<AllowedHost>().unwrap(),
            AllowedHost {
                name: "m3.test".into(),
                port: Some(80)
            }
        );
        for bad in ["", "http://m3.test", "m3.test/x", "a@m3.test", ":80"] {
            assert!(bad.parse::<AllowedHost>().is_err(), "{bad}");
        }
    }
}
