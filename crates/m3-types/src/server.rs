//! Server bindings and tool selection.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::server_era::ServerEra;

/// An MCP server started as a child process speaking stdio.
///
/// JSON uses the field name of sf-m3 (the Python implementation), `environment`, for
/// [`env`](Self::env) (`env` is accepted when reading).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(
    clippy::exhaustive_structs,
    reason = "frozen wire shape of the Python reference; other crates build it with struct literals (docs/decisions.md)"
)]
pub struct StdioServer {
    /// Binding name (the `server` of `"server:tool"`).
    pub name: String,
    /// Program to run.
    pub command: String,
    /// Arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment variables.
    #[serde(default, rename = "environment", alias = "env")]
    pub env: BTreeMap<String, String>,
    /// Working directory.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// The protocol era: negotiated (`"auto"`, the default, left out of the JSON so the
    /// binding reads as sf-m3 writes it) or pinned to a version.
    #[serde(default, skip_serializing_if = "ServerEra::is_auto")]
    pub era: ServerEra,
}

impl StdioServer {
    /// A server named `name` running `command` with no arguments.
    pub fn new(name: impl Into<String>, command: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            command: command.into(),
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            era: ServerEra::Auto,
        }
    }

    /// Pins the protocol era (default [`ServerEra::Auto`]: negotiate).
    #[must_use]
    pub fn with_era(mut self, era: ServerEra) -> Self {
        self.era = era;
        self
    }

    /// Sets the arguments.
    #[must_use]
    pub fn with_args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args = args.into_iter().map(Into::into).collect();
        self
    }

    /// Adds one environment variable.
    #[must_use]
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Sets the working directory.
    #[must_use]
    pub fn with_cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// Checks that name and command are non-empty and the name has no `:`.
    ///
    /// # Errors
    /// `invalid_argument`.
    pub fn validate(&self) -> Result<()> {
        if self.name.is_empty() || self.name.contains(':') {
            return Err(Error::model_validation(
                "server name must be a non-empty string without ':'",
            ));
        }
        if self.command.is_empty() {
            return Err(Error::model_validation(
                "server command must be a non-empty string",
            ));
        }
        Ok(())
    }
}

/// One allowed tool: `server:tool`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
#[schemars(with = "String")]
#[expect(
    clippy::exhaustive_structs,
    reason = "frozen wire shape of the Python reference; other crates build it with struct literals (docs/decisions.md)"
)]
pub struct ToolName {
    /// Server binding name.
    pub server: String,
    /// Tool name on that server.
    pub tool: String,
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.server, self.tool)
    }
}

impl FromStr for ToolName {
    type Err = Error;

    /// # Errors
    /// `invalid_argument` unless the text is `server:tool` with both parts non-empty, no
    /// whitespace, and a single `:`.
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::model_validation(format!(
                "tool selection entries must look like 'server:tool', got '{s}'"
            ))
        };
        let (server, tool) = s.split_once(':').ok_or_else(bad)?;
        if server.is_empty()
            || tool.is_empty()
            || tool.contains(':')
            || s.chars().any(char::is_whitespace)
        {
            return Err(bad());
        }
        Ok(Self {
            server: server.to_owned(),
            tool: tool.to_owned(),
        })
    }
}

impl Serialize for ToolName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ToolName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// The tools an agent may call: a set of `"server:tool"` names.
///
/// `Option<ToolSelection>` expresses the three cases of sf-m3: `None` allows every advertised
/// tool, an empty selection allows none, otherwise exactly the listed tools. JSON: an array of
/// strings.
#[derive(Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
#[schemars(with = "Vec<String>")]
pub struct ToolSelection {
    tools: BTreeSet<ToolName>,
}

impl ToolSelection {
    /// Parses `"server:tool"` names.
    ///
    /// # Errors
    /// `invalid_argument` for a malformed entry or a duplicate ("duplicate tool selection").
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Self> {
        let mut tools = BTreeSet::new();
        for name in names {
            let tool: ToolName = name.as_ref().parse()?;
            if !tools.insert(tool) {
                return Err(Error::model_validation(format!(
                    "duplicate tool selection '{}'",
                    name.as_ref()
                )));
            }
        }
        Ok(Self { tools })
    }

    /// A selection that allows no tool.
    pub fn none() -> Self {
        Self::default()
    }

    /// Whether `server:tool` is selected.
    pub fn allows(&self, server: &str, tool: &str) -> bool {
        self.tools
            .iter()
            .any(|t| t.server == server && t.tool == tool)
    }

    /// Whether nothing is selected.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The selected tools, sorted.
    pub fn iter(&self) -> impl Iterator<Item = &ToolName> {
        self.tools.iter()
    }

    /// The server names the selection refers to.
    pub fn servers(&self) -> BTreeSet<&str> {
        self.tools.iter().map(|t| t.server.as_str()).collect()
    }

    /// Checks that every selected server is one of `bound` ("unknown server").
    ///
    /// # Errors
    /// `invalid_argument` naming the first unknown server.
    pub fn check_servers<'a>(&self, bound: impl IntoIterator<Item = &'a str>) -> Result<()> {
        let bound: BTreeSet<&str> = bound.into_iter().collect();
        match self
            .tools
            .iter()
            .find(|t| !bound.contains(t.server.as_str()))
        {
            Some(t) => Err(Error::model_validation(format!(
                "tool selection '{t}' names unknown server '{}'",
                t.server
            ))),
            None => Ok(()),
        }
    }
}

impl FromStr for ToolSelection {
    type Err = Error;

    /// Parses a comma-separated list (`"a:x,b:y"`; empty text is the empty selection).
    fn from_str(s: &str) -> Result<Self> {
        if s.trim().is_empty() {
            return Ok(Self::none());
        }
        let names: Vec<&str> = s.split(',').map(str::trim).collect();
        Self::parse(&names)
    }
}

impl Serialize for ToolSelection {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_seq(self.tools.iter())
    }
}

impl<'de> Deserialize<'de> for ToolSelection {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let names = Vec::<String>::deserialize(d)?;
        Self::parse(&names).map_err(serde::de::Error::custom)
    }
}
