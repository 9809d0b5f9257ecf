//! [`TrustedProxy`]: an SSO proxy in front of the server that vouches for its users in a
//! header. The header is believed only on connections from the proxy's own addresses;
//! from anywhere else it is ignored, so a client cannot name itself.

use std::net::IpAddr;

use axum::http::HeaderName;
use ipnet::IpNet;
use m3_types::{Actor, ActorSurface, Error, Result};

/// The proxy a server trusts: the header naming the user, and the addresses it connects
/// from.
#[derive(Debug, Clone)]
pub struct TrustedProxy {
    header: HeaderName,
    from: Vec<IpNet>,
}

impl TrustedProxy {
    /// Trusts `header` (for example `X-Forwarded-User`) on connections from `from`
    /// (CIDR ranges such as `10.0.0.0/8`, `127.0.0.1/32`).
    ///
    /// # Errors
    /// `invalid_argument` for a header name that is not one, no range, or a range that does
    /// not parse.
    ///
    /// ```
    /// use m3_server::TrustedProxy;
    ///
    /// let proxy = TrustedProxy::new("X-Forwarded-User", ["10.0.0.5/32", "fd00::/8"])?;
    /// assert!(format!("{proxy:?}").contains("x-forwarded-user"));
    /// assert!(TrustedProxy::new("X-Forwarded-User", ["not-a-range"]).is_err());
    /// # Ok::<(), m3_types::Error>(())
    /// ```
    pub fn new<S: AsRef<str>>(header: &str, from: impl IntoIterator<Item = S>) -> Result<Self> {
        let header = HeaderName::from_bytes(header.as_bytes()).map_err(|_| {
            Error::model_validation(format!("'{header}' is not an HTTP header name"))
        })?;
        let from = from
            .into_iter()
            .map(|range| {
                let range = range.as_ref();
                range
                    .parse::<IpNet>()
                    .or_else(|_| range.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| {
                        Error::model_validation(format!("'{range}' is not an address range (CIDR)"))
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        if from.is_empty() {
            return Err(Error::model_validation(
                "a trusted proxy needs the address ranges it connects from",
            ));
        }
        Ok(Self { header, from })
    }

    /// The user the proxy vouches for on a request from `source` with `headers`: `None`
    /// when the request is not from the proxy or names nobody; `Some(Err)` when the proxy
    /// named a user that is not a valid principal.
    pub(crate) fn user(
        &self,
        source: Option<IpAddr>,
        headers: &axum::http::HeaderMap,
    ) -> Option<std::result::Result<String, ()>> {
        let source = source?;
        if !self.from.iter().any(|range| range.contains(&source)) {
            return None;
        }
        let value = headers.get(&self.header)?;
        let name = value.to_str().map_err(|_| ()).and_then(|name| {
            Actor::new(name.trim(), ActorSurface::Api)
                .map(|actor| actor.principal)
                .map_err(|_| ())
        });
        Some(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_counts_only_from_the_proxy() {
        let proxy = TrustedProxy::new("X-Forwarded-User", ["10.0.0.0/8"]).unwrap();
        let mut headers = axum::http::HeaderMap::new();
        headers.insert("x-forwarded-user", "alice@example.com".parse().unwrap());
        let inside = Some(IpAddr::from([10, 1, 2, 3]));
        let outside = Some(IpAddr::from([192, 168, 0, 1]));
        assert_eq!(
            proxy.user(inside, &headers),
            Some(Ok("alice@example.com".to_owned()))
        );
        assert_eq!(proxy.user(outside, &headers), None);
        assert_eq!(proxy.user(inside, &axum::http::HeaderMap::new()), None);
        headers.insert("x-forwarded-user", "".parse().unwrap());
        assert_eq!(proxy.user(inside, &headers), Some(Err(())));
        assert!(TrustedProxy::new("X-Forwarded-User", Vec::<&str>::new()).is_err());
        assert!(TrustedProxy::new("bad header", ["10.0.0.0/8"]).is_err());
        assert!(TrustedProxy::new("X-User", ["not-a-range"]).is_err());
        assert!(TrustedProxy::new("X-User", ["127.0.0.1"]).is_ok());
    }
}
