//! [`Principal`]: who a request is, as the guard in front of every route authenticated it
//! ([`crate::auth`]), and how an answer it gives is recorded ([`Principal::actor`]). A
//! handler takes it from the request's extensions; a name the client merely claims (a
//! header, a form field) is never a principal.

use m3_types::{Actor, ActorSurface};

/// Who a request is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Principal {
    name: &'static str,
}

impl Principal {
    /// A request that presented the server's `--token`: principal `token`.
    pub(crate) const SHARED_TOKEN: Self = Self { name: "token" };
    /// A request to a server without a token (loopback only): nobody was authenticated, and
    /// the record says so.
    pub(crate) const ANONYMOUS: Self = Self { name: "anonymous" };

    /// This principal answering through `surface`.
    pub(crate) fn actor(&self, surface: ActorSurface) -> Actor {
        // Both names are fixed, valid principals.
        Actor::new(self.name, surface).unwrap_or_else(|_| Actor::of_process_user(surface))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_answer_under_their_own_names() {
        let actor = Principal::SHARED_TOKEN.actor(ActorSurface::Api);
        assert_eq!(actor.principal, "token");
        assert_eq!(actor.surface, ActorSurface::Api);
        assert_eq!(
            Principal::ANONYMOUS.actor(ActorSurface::Page).principal,
            "anonymous"
        );
    }
}
