//! `wire_enum!`: the one definition of a wire enum's strings.
//!
//! For a fieldless enum it implements `ALL` (every variant, in declaration
//! order), `as_str()` (the stable wire string), `Display` (that string) and
//! `FromStr` (the inverse, rejecting unknown input). Each enum keeps its own
//! error for unknown input: either the generic `invalid_argument` "unknown
//! <what> '<input>'", or a constructor given as `unknown = |s: &str| ...`.
//! Serde names are declared on the enum itself and a test round-trips every
//! variant through both (`tests/serde_shapes.rs`).

macro_rules! wire_enum {
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
