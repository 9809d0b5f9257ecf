//! [`Actor`]: who answered a round, and through which surface.
//!
//! Every accepted response is stored with its actor in the same transaction, and the change
//! feed's `round.answered` record carries it (`docs/identity.md`). An actor is not a secret:
//! it is shown wherever a round is read, beside the redacted responses.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::reason::Reason;

/// The longest principal or display name an [`Actor`] accepts, in characters.
pub const ACTOR_NAME_MAX_CHARS: usize = 200;

wire_enum! {
    /// Through which surface an answer was given.
    #[non_exhaustive]
    pub enum ActorSurface {
        /// `"kit"`: the Rust API (`m3-kit`), in a program.
        Kit => "kit",
        /// `"cli"`: `m3 respond`.
        Cli => "cli",
        /// `"api"`: the JSON API of `m3 serve`.
        Api => "api",
        /// `"page"`: the answer page of `m3 serve`.
        Page => "page",
        /// `"link"`: a signed answer link from a notification.
        Link => "link",
        /// `"plan"`: an elicitation plan answered without a person.
        Plan => "plan",
        /// `"policy"`: a store policy answered an unattended round.
        Policy => "policy",
    }
    what = "actor surface"
}

/// Who answered a round: the principal (an operating-system user, a token's name, the
/// user an SSO proxy vouched for, `link:<subscription>`, `plan:<file>`, `policy:<name>`),
/// the surface the answer came through, and an optional display name.
///
/// ```
/// use m3_types::{Actor, ActorSurface};
///
/// let actor = Actor::new("alice", ActorSurface::Cli)?.with_display_name("Alice Liddell")?;
/// assert_eq!(actor.to_string(), "Alice Liddell (cli)");
/// assert!(Actor::new("", ActorSurface::Cli).is_err());
/// # Ok::<(), m3_types::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Actor {
    /// Who answered: 1 to 200 characters, no control characters.
    pub principal: String,
    /// Through which surface.
    pub surface: ActorSurface,
    /// A name to show instead of the principal (`null`: show the principal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
}

impl Actor {
    /// `principal` answering through `surface`.
    ///
    /// # Errors
    /// `invalid_argument` (reason `invalid_actor`) for an empty principal, one longer than
    /// [`ACTOR_NAME_MAX_CHARS`], or one with a control character.
    pub fn new(principal: impl Into<String>, surface: ActorSurface) -> Result<Self> {
        let principal = principal.into();
        check_name("principal", &principal)?;
        Ok(Self {
            principal,
            surface,
            display_name: None,
        })
    }

    /// This actor shown as `display_name`.
    ///
    /// # Errors
    /// As [`Actor::new`], for the display name.
    pub fn with_display_name(mut self, display_name: impl Into<String>) -> Result<Self> {
        let display_name = display_name.into();
        check_name("display name", &display_name)?;
        self.display_name = Some(display_name);
        Ok(self)
    }

    /// Checks an actor read back from storage or the wire (the rules of [`Actor::new`]).
    ///
    /// # Errors
    /// As [`Actor::new`].
    pub fn validate(&self) -> Result<()> {
        check_name("principal", &self.principal)?;
        match &self.display_name {
            Some(name) => check_name("display name", name),
            None => Ok(()),
        }
    }

    /// The name to show: the display name, else the principal.
    pub fn shown_name(&self) -> &str {
        self.display_name.as_deref().unwrap_or(&self.principal)
    }

    /// The actor as compact JSON text (what the stores keep).
    ///
    /// # Errors
    /// `storage_error` if it cannot be encoded (never for a valid actor).
    pub fn to_json_text(&self) -> Result<String> {
        serde_json::to_string(self)
            .map_err(|e| Error::storage(format!("cannot encode an actor: {e}")))
    }

    /// The actor stored as `text` by [`Actor::to_json_text`].
    ///
    /// # Errors
    /// `storage_error` for text that is not a valid actor.
    pub fn from_json_text(text: &str) -> Result<Self> {
        let actor: Self = serde_json::from_str(text)
            .map_err(|e| Error::storage(format!("stored actor is invalid: {e}")))?;
        actor
            .validate()
            .map_err(|e| Error::storage(format!("stored actor is invalid: {e}")))?;
        Ok(actor)
    }
}

impl Actor {
    /// The operating-system user running this process answering through `surface`: the
    /// first of `USER`, `LOGNAME` and `USERNAME` that is a valid principal, else `unknown`.
    pub fn of_process_user(surface: ActorSurface) -> Self {
        let user = ["USER", "LOGNAME", "USERNAME"]
            .into_iter()
            .filter_map(|name| std::env::var(name).ok())
            .find(|name| check_name("principal", name).is_ok())
            .unwrap_or_else(|| "unknown".to_owned());
        Self {
            principal: user,
            surface,
            display_name: None,
        }
    }
}

impl std::fmt::Display for Actor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.shown_name(), self.surface)
    }
}

fn check_name(what: &str, name: &str) -> Result<()> {
    let problem = if name.is_empty() {
        Some("must not be empty")
    } else if name.chars().count() > ACTOR_NAME_MAX_CHARS {
        Some("is longer than 200 characters")
    } else if name.chars().any(char::is_control) {
        Some("must not contain control characters")
    } else {
        None
    };
    match problem {
        Some(problem) => Err(
            Error::model_validation(format!("the actor's {what} {problem}"))
                .with_reason(Reason::InvalidActor),
        ),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_names_are_refused_with_the_reason() {
        let long = "x".repeat(ACTOR_NAME_MAX_CHARS + 1);
        for bad in ["", "a\nb", long.as_str()] {
            let error = Actor::new(bad, ActorSurface::Api).err();
            assert_eq!(error.as_ref().map(Error::code), Some("invalid_argument"));
            assert_eq!(error.and_then(|e| e.reason()), Some(Reason::InvalidActor));
        }
        assert!(Actor::new("x".repeat(ACTOR_NAME_MAX_CHARS), ActorSurface::Api).is_ok());
    }

    #[test]
    fn an_actor_round_trips_through_its_stored_text() -> Result<()> {
        let actor = Actor::new("bob", ActorSurface::Page)?.with_display_name("Bob")?;
        let text = actor.to_json_text()?;
        assert_eq!(
            text,
            r#"{"principal":"bob","surface":"page","display_name":"Bob"}"#
        );
        assert_eq!(Actor::from_json_text(&text)?, actor);
        let damaged = Actor::from_json_text(r#"{"principal":"","surface":"page"}"#).err();
        assert_eq!(damaged.map(|e| e.code()), Some("storage_error"));
        Ok(())
    }
}
