//! Where the prompter's answers come from: any `BufRead` (a pipe, a byte buffer in tests), or
//! the terminal itself with line editing and history ([`TerminalInput`]).

use std::io::{self, BufRead, Write};

use rustyline::Editor;
use rustyline::config::{Behavior, Config};
use rustyline::error::ReadlineError;
use rustyline::history::DefaultHistory;

/// One answer line at a time.
pub(crate) trait LineInput {
    /// Shows `prompt` (written to `output`, unless the input draws it itself) and reads one
    /// line without its line ending. `None` when the person ended the input (Ctrl-D) or
    /// interrupted it (Ctrl-C): the prompter then gives up and leaves the round pending.
    ///
    /// # Errors
    /// I/O errors of the input or the output.
    fn read_line(&mut self, prompt: &str, output: &mut dyn Write) -> io::Result<Option<String>>;
}

impl<R: BufRead> LineInput for R {
    fn read_line(&mut self, prompt: &str, output: &mut dyn Write) -> io::Result<Option<String>> {
        write!(output, "{prompt}")?;
        output.flush()?;
        let mut line = String::new();
        if BufRead::read_line(self, &mut line)? == 0 {
            writeln!(output)?;
            return Ok(None);
        }
        while line.ends_with(['\n', '\r']) {
            line.pop();
        }
        Ok(Some(line))
    }
}

/// The terminal, through rustyline: the arrow keys edit the line and recall earlier answers
/// (history lasts for this process only), Ctrl-C and Ctrl-D give up. Prompts and echo go to
/// the terminal device itself, so stdout stays free for the command's output.
pub(crate) struct TerminalInput {
    editor: Editor<(), DefaultHistory>,
}

impl std::fmt::Debug for TerminalInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TerminalInput").finish_non_exhaustive()
    }
}

impl TerminalInput {
    /// Opens the line editor on the terminal.
    ///
    /// # Errors
    /// When the terminal cannot be set up.
    pub(crate) fn open() -> io::Result<Self> {
        let config = Config::builder()
            .behavior(Behavior::PreferTerm)
            .auto_add_history(true)
            .build();
        let editor = Editor::with_config(config).map_err(io::Error::other)?;
        Ok(Self { editor })
    }
}

impl LineInput for TerminalInput {
    fn read_line(&mut self, prompt: &str, output: &mut dyn Write) -> io::Result<Option<String>> {
        output.flush()?;
        match self.editor.readline(prompt) {
            Ok(line) => Ok(Some(line)),
            Err(ReadlineError::Eof | ReadlineError::Interrupted) => Ok(None),
            Err(ReadlineError::Io(error)) => Err(error),
            Err(other) => Err(io::Error::other(other)),
        }
    }
}
