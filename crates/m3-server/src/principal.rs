//! [`Principal`]: who a request is, as the guard in front of every route authenticated it
//! ([`crate::auth`]), what it may do ([`TokenScope`]), and how an answer it gives is
//! recorded ([`Principal::actor`]). A handler takes it from the request's extensions; a
//! name the client merely claims (a header, a form field) is never a principal.

use m3_kit::tokens::{ApiToken, TokenScope};
use m3_types::{Actor, ActorSurface};

/// Who a request is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Principal {
    name: String,
    scope: TokenScope,
}

impl Principal {
    /// A request that presented the server's `--token`: principal `token`, every scope.
    pub(crate) fn shared_token() -> Self {
        Self {
            name: "token".to_owned(),
            scope: TokenScope::Admin,
        }
    }

    /// A request to a server without a token (loopback only) that presented none: nobody
    /// was authenticated, and the record says so.
    pub(crate) fn anonymous() -> Self {
        Self {
            name: "anonymous".to_owned(),
            scope: TokenScope::Admin,
        }
    }

    /// A request that presented the store's token `token`: its name, its scope.
    pub(crate) fn of_token(token: &ApiToken) -> Self {
        Self {
            name: token.name.clone(),
            scope: token.scope,
        }
    }

    /// The user a trusted SSO proxy vouched for (already a valid principal): scope `answer`.
    pub(crate) fn proxied(name: String) -> Self {
        Self {
            name,
            scope: TokenScope::Answer,
        }
    }

    /// Whether this principal may do what `needed` allows.
    pub(crate) fn allows(&self, needed: TokenScope) -> bool {
        self.scope.allows(needed)
    }

    /// This principal answering through `surface`.
    pub(crate) fn actor(&self, surface: ActorSurface) -> Actor {
        // Token names are checked when made (a subset of what an actor allows), and the
        // two fixed names are valid.
        Actor::new(self.name.as_str(), surface).unwrap_or_else(|_| Actor::of_process_user(surface))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_answer_under_their_own_names() {
        let actor = Principal::shared_token().actor(ActorSurface::Api);
        assert_eq!(actor.principal, "token");
        assert_eq!(actor.surface, ActorSurface::Api);
        assert_eq!(
            Principal::anonymous().actor(ActorSurface::Page).principal,
            "anonymous"
        );
        assert!(Principal::shared_token().allows(TokenScope::Admin));
    }
}
