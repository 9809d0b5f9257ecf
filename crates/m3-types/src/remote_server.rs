//! An MCP server reached remotely over Streamable HTTP: its [`HttpServer`] binding, the
//! binding's trust levels, and [`ServerBinding`], the enum of both binding kinds.
//!
//! An [`HttpServer`] names an MCP endpoint by URL. Its [`ServerTrust`] says which
//! addresses it may reach: `untrusted` (the default) and `public` only global
//! addresses, `trusted_private` any address, `loopback` only loopback addresses.
//! A literal host the trust level refuses (an IP literal, `localhost`) is refused
//! by [`HttpServer::validate`] at submission; a host name is checked again after
//! resolution, when the client connects. Header values may reference
//! environment variables as `${NAME}`; they are resolved only at connection time
//! ([`HttpServer::resolve_headers`]), so the stored binding holds the reference,
//! never the value.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::oauth::OAuthSettings;
use crate::server::StdioServer;
use crate::server_era::ServerEra;

wire_enum! {
    /// Which addresses an [`HttpServer`] binding may reach (sf-m3's trust levels;
    /// its `sdk_loopback` is `loopback` here and is accepted as an alias).
    #[expect(
        clippy::exhaustive_enums,
        reason = "the trust levels of the Python reference; a new level is a breaking change"
    )]
    #[derive(Default)]
    pub enum ServerTrust {
        /// Only global (public) addresses; the default. An agent is never handed an
        /// untrusted endpoint.
        #[default]
        Untrusted => "untrusted",
        /// Only global addresses, declared public.
        Public => "public",
        /// Any address, private and loopback included.
        TrustedPrivate => "trusted_private",
        /// Only loopback addresses (`127.0.0.0/8`, `::1`, `localhost`).
        #[serde(alias = "sdk_loopback")]
        Loopback => "loopback",
    }
    unknown = |s: &str| Error::model_validation(format!(
        "server trust must be one of untrusted, public, trusted_private, loopback, got '{s}'"
    )).with_detail("value", s)
}

impl ServerTrust {
    /// Whether a binding of this trust level may connect to `address`.
    pub fn allows(self, address: IpAddr) -> bool {
        match self {
            Self::Untrusted | Self::Public => is_global(address),
            Self::TrustedPrivate => true,
            Self::Loopback => address.is_loopback(),
        }
    }
}

/// Whether `address` is a global (publicly routable) address: not loopback,
/// private, link-local, shared, documentation, benchmarking, reserved,
/// broadcast, unspecified or unique-local.
pub fn is_global(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => is_global_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_global_v4(v4),
            None => is_global_v6(v6),
        },
    }
}

fn is_global_v4(a: Ipv4Addr) -> bool {
    let [o1, o2, o3, _] = a.octets();
    !(a.is_private()
        || a.is_loopback()
        || a.is_link_local()
        || a.is_broadcast()
        || a.is_documentation()
        || a.is_unspecified()
        || o1 == 0
        || (o1 == 100 && (64..128).contains(&o2))
        || (o1 == 192 && o2 == 0 && o3 == 0)
        || (o1 == 198 && (18..20).contains(&o2))
        || o1 >= 240)
}

fn is_global_v6(a: Ipv6Addr) -> bool {
    let first = a.segments()[0];
    !(a.is_loopback()
        || a.is_unspecified()
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
        || (first == 0x2001 && a.segments()[1] == 0x0db8)
        || a.is_multicast())
}

/// An MCP server reached over Streamable HTTP.
///
/// JSON: `{"type": "http", "name": ..., "url": ..., "headers": {...}, "trust": ...}`.
/// Header values may contain `${NAME}` references to environment variables,
/// resolved when the client connects ([`HttpServer::resolve_headers`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(from = "HttpServerWire", into = "HttpServerWire")]
#[schemars(with = "HttpServerWire")]
#[expect(
    clippy::exhaustive_structs,
    reason = "wire shape of a binding; other crates build it with struct literals (docs/decisions.md)"
)]
pub struct HttpServer {
    /// Binding name (the `server` of `"server:tool"`).
    pub name: String,
    /// The endpoint: `http://` or `https://`, with a host, without credentials.
    pub url: String,
    /// Extra request headers; values may reference `${NAME}` environment variables.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Which addresses the binding may reach (default `untrusted`).
    #[serde(default)]
    pub trust: ServerTrust,
    /// The protocol era: negotiated (`"auto"`, the default, left out of the JSON) or
    /// pinned to a version.
    #[serde(default, skip_serializing_if = "ServerEra::is_auto")]
    pub era: ServerEra,
    /// How to authorize when the server asks for OAuth (default `None`: a challenge
    /// starts the authorization code grant with a dynamically registered client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthSettings>,
}

/// The `type` tag of an [`HttpServer`]'s JSON.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum HttpTag {
    /// `"http"`.
    Http,
}

/// An [`HttpServer`] as JSON: with its `"type": "http"` tag, no unknown fields.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct HttpServerWire {
    /// Always `"http"`.
    #[serde(rename = "type")]
    kind: HttpTag,
    /// Binding name (the `server` of `"server:tool"`).
    name: String,
    /// The endpoint: `http://` or `https://`, with a host, without credentials.
    url: String,
    /// Extra request headers; values may reference `${NAME}` environment variables.
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// Which addresses the binding may reach (default `untrusted`).
    #[serde(default)]
    trust: ServerTrust,
    /// The protocol era (default `auto`: negotiate).
    #[serde(default, skip_serializing_if = "ServerEra::is_auto")]
    era: ServerEra,
    /// OAuth settings (default: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    oauth: Option<OAuthSettings>,
}

impl From<HttpServerWire> for HttpServer {
    fn from(wire: HttpServerWire) -> Self {
        Self {
            name: wire.name,
            url: wire.url,
            headers: wire.headers,
            trust: wire.trust,
            era: wire.era,
            oauth: wire.oauth,
        }
    }
}

impl From<HttpServer> for HttpServerWire {
    fn from(server: HttpServer) -> Self {
        Self {
            kind: HttpTag::Http,
            name: server.name,
            url: server.url,
            headers: server.headers,
            trust: server.trust,
            era: server.era,
            oauth: server.oauth,
        }
    }
}

/// Header values resolved for one connection, with the values to redact.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResolvedHeaders {
    /// `(name, value)` pairs to send.
    pub headers: Vec<(String, String)>,
    /// Every value an environment reference contributed (and each whole header
    /// value that contains one): redact these wherever they could appear.
    pub secrets: Vec<String>,
}

impl HttpServer {
    /// An `untrusted` binding named `name` for `url`, without headers.
    pub fn new(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            url: url.into(),
            headers: BTreeMap::new(),
            trust: ServerTrust::Untrusted,
            era: ServerEra::Auto,
            oauth: None,
        }
    }

    /// Adds one header (the value may reference `${NAME}`).
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// Sets the trust level.
    #[must_use]
    pub fn with_trust(mut self, trust: ServerTrust) -> Self {
        self.trust = trust;
        self
    }

    /// Pins the protocol era (default [`ServerEra::Auto`]: negotiate).
    #[must_use]
    pub fn with_era(mut self, era: ServerEra) -> Self {
        self.era = era;
        self
    }

    /// Sets the OAuth settings.
    #[must_use]
    pub fn with_oauth(mut self, oauth: OAuthSettings) -> Self {
        self.oauth = Some(oauth);
        self
    }

    /// The parsed endpoint.
    ///
    /// # Errors
    /// `invalid_argument` unless the URL is `http://` or `https://` with a host
    /// and no user name or password.
    pub fn endpoint(&self) -> Result<url::Url> {
        let invalid = |why: &str| {
            Error::model_validation(format!(
                "MCP server '{}': url '{}' {why}",
                self.name, self.url
            ))
            .with_detail("server", self.name.clone())
        };
        let url = url::Url::parse(&self.url).map_err(|_| invalid("is not a valid URL"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid("must start with http:// or https://"));
        }
        if url.host().is_none() {
            return Err(invalid("has no host"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            // Not echoing the URL: it holds the credentials.
            return Err(Error::model_validation(format!(
                "MCP server '{}': the url carries credentials; pass them as a header (--server-header)",
                self.name
            ))
            .with_detail("server", self.name.clone()));
        }
        Ok(url)
    }

    /// Checks the name, the URL, the headers (names, `${NAME}` syntax) and a
    /// literal host against the trust level.
    ///
    /// # Errors
    /// `invalid_argument`; a refused host names the host and the trust level
    /// (details `server`, `host`, `trust`).
    pub fn validate(&self) -> Result<()> {
        if self.name.is_empty() || self.name.contains(':') {
            return Err(Error::model_validation(
                "server name must be a non-empty string without ':'",
            ));
        }
        let url = self.endpoint()?;
        for (name, value) in &self.headers {
            let valid_name = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !valid_name {
                return Err(Error::model_validation(format!(
                    "MCP server '{}': '{name}' is not a valid header name",
                    self.name
                )));
            }
            substitute(value, &|_| Some("set".to_owned()))
                .map_err(|e| self.header_error(name, e))?;
        }
        if let Some(address) = literal_address(&url) {
            self.check_address(host_text(&url), address)?;
        }
        if let Some(oauth) = &self.oauth {
            oauth.validate(&self.name)?;
        }
        Ok(())
    }

    /// Refuses `address` (an address `host` stands for) unless the trust level
    /// allows it.
    ///
    /// # Errors
    /// `invalid_argument` naming the host, the address and the trust level.
    pub fn check_address(&self, host: &str, address: IpAddr) -> Result<()> {
        if self.trust.allows(address) {
            return Ok(());
        }
        let kind = if address.is_loopback() {
            "a loopback address"
        } else if is_global(address) {
            "a public address"
        } else {
            "a private address"
        };
        let hint = match self.trust {
            ServerTrust::Loopback => "",
            _ if address.is_loopback() => {
                "; bind it with trust 'loopback' (or 'trusted_private') to allow it"
            }
            _ => "; bind it with trust 'trusted_private' to allow it",
        };
        Err(Error::model_validation(format!(
            "MCP server '{}': host '{host}' is {kind} ({address}), which trust level '{}' refuses{hint}",
            self.name,
            self.trust.as_str()
        ))
        .with_detail("server", self.name.clone())
        .with_detail("host", host.to_owned())
        .with_detail("address", address.to_string())
        .with_detail("trust", self.trust.as_str()))
    }

    /// The headers with every `${NAME}` replaced by `lookup(NAME)`.
    ///
    /// # Errors
    /// `invalid_argument` naming the header and the variable when a variable is
    /// unset or empty, or a reference is malformed (never the value).
    pub fn resolve_headers(
        &self,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ResolvedHeaders> {
        let mut resolved = ResolvedHeaders::default();
        for (name, template) in &self.headers {
            let (value, secrets) =
                substitute(template, lookup).map_err(|e| self.header_error(name, e))?;
            if !secrets.is_empty() {
                resolved.secrets.push(value.clone());
            }
            resolved.secrets.extend(secrets);
            resolved.headers.push((name.clone(), value));
        }
        resolved.secrets.retain(|s| !s.is_empty());
        resolved
            .secrets
            .sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        resolved.secrets.dedup();
        Ok(resolved)
    }

    fn header_error(&self, header: &str, error: TemplateError) -> Error {
        let (message, variable) = match error {
            TemplateError::Malformed => (
                "has a malformed '${' reference (expected ${NAME})".to_owned(),
                None,
            ),
            TemplateError::Unset(variable) => (
                format!("references environment variable '{variable}', which is not set"),
                Some(variable),
            ),
        };
        let mut error = Error::model_validation(format!(
            "MCP server '{}': header '{header}' {message}",
            self.name
        ))
        .with_detail("server", self.name.clone())
        .with_detail("header", header.to_owned());
        if let Some(variable) = variable {
            error = error.with_detail("variable", variable);
        }
        error
    }
}

/// The URL's host as written (without IPv6 brackets).
fn host_text(url: &url::Url) -> &str {
    url.host_str()
        .map(|h| h.trim_start_matches('[').trim_end_matches(']'))
        .unwrap_or_default()
}

/// The address a literal host stands for: an IP literal, or loopback for
/// `localhost` names. `None` for a host name that needs resolving.
fn literal_address(url: &url::Url) -> Option<IpAddr> {
    match url.host()? {
        url::Host::Ipv4(v4) => Some(IpAddr::V4(v4)),
        url::Host::Ipv6(v6) => Some(IpAddr::V6(v6)),
        url::Host::Domain(name) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            (name == "localhost" || name.ends_with(".localhost") || name == "localhost.localdomain")
                .then_some(IpAddr::V4(Ipv4Addr::LOCALHOST))
        }
    }
}

enum TemplateError {
    Malformed,
    Unset(String),
}

/// Replaces `${NAME}` (NAME: ASCII letters, digits, `_`, not starting with a
/// digit); returns the text and the substituted values.
fn substitute(
    template: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> std::result::Result<(String, Vec<String>), TemplateError> {
    let mut out = String::with_capacity(template.len());
    let mut secrets = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or(TemplateError::Malformed)?;
        let name = &after[..end];
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(TemplateError::Malformed);
        }
        let value = lookup(name)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| TemplateError::Unset(name.to_owned()))?;
        out.push_str(&value);
        secrets.push(value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok((out, secrets))
}

/// One MCP server binding: a stdio child process or a Streamable HTTP endpoint.
///
/// JSON: a [`StdioServer`] object (no `type`, or `"type": "stdio"`), or an
/// [`HttpServer`] object with `"type": "http"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(untagged)]
#[non_exhaustive]
pub enum ServerBinding {
    /// A child process speaking stdio.
    Stdio(StdioServer),
    /// A Streamable HTTP endpoint.
    Http(HttpServer),
}

impl ServerBinding {
    /// The binding name.
    pub fn name(&self) -> &str {
        match self {
            Self::Stdio(server) => &server.name,
            Self::Http(server) => &server.name,
        }
    }

    /// Checks the binding ([`StdioServer::validate`], [`HttpServer::validate`]).
    ///
    /// # Errors
    /// `invalid_argument`.
    pub fn validate(&self) -> Result<()> {
        match self {
            Self::Stdio(server) => server.validate(),
            Self::Http(server) => server.validate(),
        }
    }

    /// The stdio binding, if this is one.
    pub fn as_stdio(&self) -> Option<&StdioServer> {
        match self {
            Self::Stdio(server) => Some(server),
            Self::Http(_) => None,
        }
    }

    /// The binding's protocol era ([`ServerEra::Auto`] unless pinned).
    pub fn era(&self) -> ServerEra {
        match self {
            Self::Stdio(server) => server.era,
            Self::Http(server) => server.era,
        }
    }

    /// The HTTP binding, if this is one.
    pub fn as_http(&self) -> Option<&HttpServer> {
        match self {
            Self::Http(server) => Some(server),
            Self::Stdio(_) => None,
        }
    }
}

impl From<StdioServer> for ServerBinding {
    fn from(server: StdioServer) -> Self {
        Self::Stdio(server)
    }
}

impl From<HttpServer> for ServerBinding {
    fn from(server: HttpServer) -> Self {
        Self::Http(server)
    }
}

impl<'de> Deserialize<'de> for ServerBinding {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        use serde::de::Error as _;
        let mut value = Value::deserialize(d)?;
        let kind = value.get("type").cloned();
        let text = kind.as_ref().and_then(Value::as_str);
        match (kind.is_some(), text) {
            (_, Some("http" | "streamable_http")) => {
                if let Some(map) = value.as_object_mut() {
                    map.insert("type".to_owned(), Value::from("http"));
                }
                serde_json::from_value(value)
                    .map(Self::Http)
                    .map_err(D::Error::custom)
            }
            (false, _) | (true, Some("stdio")) => {
                if let Some(map) = value.as_object_mut() {
                    map.remove("type");
                }
                serde_json::from_value(value)
                    .map(Self::Stdio)
                    .map_err(D::Error::custom)
            }
            _ => Err(D::Error::custom(format!(
                "server binding type must be \"stdio\" or \"http\", got {}",
                kind.unwrap_or(Value::Null)
            ))),
        }
    }
}
