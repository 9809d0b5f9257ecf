//! OAuth settings of an [`HttpServer`](crate::HttpServer) binding: which grant the client
//! uses when the server answers `401` with an MCP authorization challenge, and the
//! client identity for it.
//!
//! The binding never holds a secret: a client secret is named by the environment
//! variable or the file it is read from, when the client connects. Without settings,
//! a server's challenge still starts the authorization code grant with a dynamically
//! registered client (the MCP authorization specification's default for a person).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

wire_enum! {
    /// How the client obtains an access token.
    #[expect(
        clippy::exhaustive_enums,
        reason = "the two grants of the MCP authorization specification; a new one is a new feature"
    )]
    #[derive(Default)]
    pub enum OAuthGrant {
        /// Authorization code with PKCE, for a person: the authorization URL is shown, a
        /// loopback listener receives the redirect. The default.
        #[default]
        AuthorizationCode => "authorization_code",
        /// Client credentials, for a worker without a person: a configured client id
        /// and secret are exchanged for a token directly.
        ClientCredentials => "client_credentials",
    }
    unknown = |s: &str| Error::model_validation(format!(
        "OAuth grant must be 'authorization_code' or 'client_credentials', got '{s}'"
    )).with_detail("value", s)
}

/// The OAuth settings of one HTTP binding.
///
/// JSON: `{"grant": "client_credentials", "client_id": "...", "client_secret_env":
/// "VAR", "scopes": ["mcp:tools"]}`; every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(
    clippy::exhaustive_structs,
    reason = "wire shape of a binding's settings; built with struct literals like the binding"
)]
pub struct OAuthSettings {
    /// The grant (default `authorization_code`).
    #[serde(default)]
    pub grant: OAuthGrant,
    /// A pre-registered client id; without one the client registers itself
    /// dynamically (RFC 7591). Required for `client_credentials`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The environment variable holding the client secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_env: Option<String>,
    /// The file holding the client secret (surrounding whitespace ignored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_file: Option<String>,
    /// Scopes to request; empty: the challenge's or the server's `scopes_supported`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// The HTTPS URL of a client ID metadata document the operator hosts (SEP-991): used
    /// as the client id by an authorization server that supports such documents, instead
    /// of registering dynamically.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
    /// The loopback port of the redirect listener (default: any free port); a client
    /// registered in advance needs the port its redirect URI names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_port: Option<u16>,
}

impl OAuthSettings {
    /// Settings for the client credentials grant of `client_id`, its secret read from
    /// the environment variable `secret_env`.
    pub fn client_credentials(client_id: impl Into<String>, secret_env: impl Into<String>) -> Self {
        Self {
            grant: OAuthGrant::ClientCredentials,
            client_id: Some(client_id.into()),
            client_secret_env: Some(secret_env.into()),
            ..Self::default()
        }
    }

    /// Checks that the settings can work: client credentials need a client id and a
    /// secret source; a secret has one source at most.
    ///
    /// # Errors
    /// `invalid_argument` naming the server and what is missing.
    pub fn validate(&self, server: &str) -> Result<()> {
        let invalid = |why: &str| {
            Error::model_validation(format!("MCP server '{server}': OAuth settings {why}"))
                .with_detail("server", server.to_owned())
        };
        if self.client_secret_env.is_some() && self.client_secret_file.is_some() {
            return Err(invalid(
                "name both client_secret_env and client_secret_file; keep one",
            ));
        }
        if let Some(url) = &self.client_metadata_url
            && !url.starts_with("https://")
        {
            return Err(invalid("have a client_metadata_url that is not https://"));
        }
        if self.client_id.as_deref() == Some("") {
            return Err(invalid("have an empty client_id"));
        }
        let has_secret = self.client_secret_env.is_some() || self.client_secret_file.is_some();
        if has_secret && self.client_id.is_none() {
            return Err(invalid("name a client secret without a client_id"));
        }
        if self.grant == OAuthGrant::ClientCredentials && !has_secret {
            return Err(invalid(
                "use client_credentials without a client_id and a client_secret_env or client_secret_file",
            ));
        }
        Ok(())
    }

    /// The client secret, read now from its variable (through `lookup`) or its file.
    ///
    /// # Errors
    /// `invalid_argument` naming the variable or the file (never the value) when it is
    /// unset, empty or unreadable.
    pub fn client_secret(
        &self,
        server: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<String>> {
        let missing = |what: String| {
            Error::model_validation(format!(
                "MCP server '{server}': the OAuth client secret {what}"
            ))
            .with_detail("server", server.to_owned())
        };
        if let Some(name) = &self.client_secret_env {
            return match lookup(name).filter(|value| !value.is_empty()) {
                Some(value) => Ok(Some(value)),
                None => Err(missing(format!("variable '{name}' is not set"))),
            };
        }
        if let Some(path) = &self.client_secret_file {
            let text = std::fs::read_to_string(path)
                .map_err(|error| missing(format!("file '{path}' cannot be read: {error}")))?;
            let secret = text.trim();
            if secret.is_empty() {
                return Err(missing(format!("file '{path}' is empty")));
            }
            return Ok(Some(secret.to_owned()));
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_credentials_need_an_id_and_a_secret_source() {
        let mut settings = OAuthSettings {
            grant: OAuthGrant::ClientCredentials,
            ..OAuthSettings::default()
        };
        assert!(settings.validate("s").is_err());
        settings.client_id = Some("worker".into());
        assert!(settings.validate("s").is_err());
        settings.client_secret_env = Some("SECRET".into());
        settings.validate("s").unwrap();
        settings.client_secret_file = Some("/x".into());
        assert!(settings.validate("s").is_err());
    }

    #[test]
    fn the_secret_is_read_when_asked_and_never_named_in_errors() {
        let settings = OAuthSettings::client_credentials("worker", "SECRET");
        let found = settings
            .client_secret("s", &|name| (name == "SECRET").then(|| "hush".to_owned()))
            .unwrap();
        assert_eq!(found.as_deref(), Some("hush"));
        let error = settings.client_secret("s", &|_| None).unwrap_err();
        assert!(error.message().contains("'SECRET'"), "{}", error.message());
    }

    #[test]
    fn json_round_trips_and_refuses_unknown_fields() {
        let json = serde_json::json!({"grant": "client_credentials", "client_id": "w",
            "client_secret_env": "S", "scopes": ["a"]});
        let settings: OAuthSettings = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(serde_json::to_value(&settings).unwrap(), json);
        assert!(
            serde_json::from_value::<OAuthSettings>(serde_json::json!({"secret": "x"})).is_err()
        );
    }
}
