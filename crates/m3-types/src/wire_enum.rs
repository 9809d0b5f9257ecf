//! `wire_enum!`: the one definition of a wire enum's strings.
//!
//! For a fieldless enum it implements `ALL` (every variant, in declaration
//! order), `as_str()` (the stable wire string), `Display` (that string) and
//! `FromStr` (the inverse, rejecting unknown input). Each enum keeps its own
//! error for unknown input: either the generic `invalid_argument` "unknown
//! WHAT 'INPUT'", or a constructor given as `unknown = |s: &str| ...`.
//!
//! The declaring form writes the enum too, so each wire string is written once and is
//! also its serde name (`#[serde(rename = ...)]`); the enum gets the derives every wire
//! enum has (`Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize,
//! Deserialize, JsonSchema`); its own attributes (docs, `#[expect]`, `#[derive(Default)]`,
//! `#[non_exhaustive]`) and each variant's (`#[default]`, `#[serde(alias = ...)]`) are
//! kept. The unknown-input error follows the enum as `unknown = |s: &str| ...` or
//! `what = "WHAT"`:
//!
//! ```text
//! wire_enum! {
//!     /// How a finished execution ended.
//!     pub enum ExecutionOutcome {
//!         /// `"completed"`
//!         Completed => "completed",
//!     }
//!     what = "execution outcome"
//! }
//! ```
//!
//! A test round-trips every variant through serde and `FromStr` (`tests/serde_shapes.rs`).

macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $($(#[$variant_meta:meta])* $variant:ident => $text:literal),* $(,)?
        }
        $($error:tt)*
    ) => {
        $(#[$meta])*
        #[derive(
            Debug,
            Clone,
            Copy,
            PartialEq,
            Eq,
            Hash,
            PartialOrd,
            Ord,
            ::serde::Serialize,
            ::serde::Deserialize,
            ::schemars::JsonSchema,
        )]
        pub enum $name {
            $($(#[$variant_meta])* #[serde(rename = $text)] $variant,)*
        }
        wire_enum!(@error $name, [$($variant => $text),*] $($error)*);
    };
    (@error $name:ident, [$($variant:ident => $text:literal),*] unknown = $unknown:expr) => {
        wire_enum!($name, [$($variant => $text),*], unknown = $unknown);
    };
    (@error $name:ident, [$($variant:ident => $text:literal),*] what = $what:literal) => {
        wire_enum!($name, $what, [$($variant => $text),*]);
    };
    ($name:ident, [$($variant:ident => $text:literal),* $(,)?], unknown = $unknown:expr) => {
        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: [Self; [$($text),*].len()] = [$(Self::$variant),*];

            /// The stable wire string.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)*
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::error::Error;

            /// # Errors
            /// The enum's own error for an unknown string, quoting it.
            fn from_str(s: &str) -> $crate::error::Result<Self> {
                let unknown: fn(&str) -> $crate::error::Error = $unknown;
                Self::ALL
                    .into_iter()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| unknown(s))
            }
        }
    };
    ($name:ident, $what:literal, [$($variant:ident => $text:literal),* $(,)?]) => {
        wire_enum!($name, [$($variant => $text),*], unknown = |s: &str| {
            $crate::error::Error::model_validation(format!(concat!("unknown ", $what, " '{}'"), s))
        });
    };
}
