//! Bounded NDJSON line reading over any buffered reader, for `m3-runtime`'s MCP relay
//! (`relay::run`, `relay::observer`). (The MCP client's stdout reader, `frames`, reads on
//! demand inside its transport and keeps the same bound.)
//!
//! The bound counts the frame without its newline. What to do with a line past the
//! bound is the caller's choice: the relay forwards it byte for byte with
//! [`pass_rest_of_line`], the MCP client fails the connection. The reader does not
//! decode: bytes are forwarded unchanged, and each caller's JSON parse rejects a frame
//! that is not UTF-8 JSON.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

/// The outcome of one [`read_line`].
#[derive(Debug)]
#[expect(
    clippy::exhaustive_enums,
    reason = "the outcomes of reading a line; callers match every one"
)]
pub enum Line {
    /// `buf` holds one line (with its newline, unless the input ended without one).
    Complete,
    /// The line is longer than the bound; `buf` holds its beginning, the rest is unread.
    Oversized,
    /// The input ended (nothing in `buf`).
    Eof,
    /// Reading failed.
    Failed(std::io::Error),
}

/// Reads one line into `buf` (cleared first), at most `max` bytes excluding the newline.
pub async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> Line {
    buf.clear();
    loop {
        let (consumed, done) = {
            let available = match reader.fill_buf().await {
                Ok(available) => available,
                Err(error) => return Line::Failed(error),
            };
            if available.is_empty() {
                // A last line without its newline is still a line.
                return if buf.is_empty() {
                    Line::Eof
                } else {
                    Line::Complete
                };
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            // The frame excludes its terminating newline.
            if buf.len() + newline.unwrap_or(take) > max {
                return Line::Oversized;
            }
            buf.extend_from_slice(&available[..take]);
            (take, newline.is_some())
        };
        reader.consume(consumed);
        if done {
            return Line::Complete;
        }
    }
}

/// Copies the rest of the current line (through its newline) from `reader` to `out`,
/// or discards it when `out` is `None`.
///
/// # Errors
/// The first read or write failure.
pub async fn pass_rest_of_line<R, W>(reader: &mut R, mut out: Option<&mut W>) -> std::io::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    loop {
        let (consumed, done) = {
            let available = reader.fill_buf().await?;
            if available.is_empty() {
                return Ok(());
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            if let Some(out) = out.as_mut() {
                out.write_all(&available[..take]).await?;
            }
            (take, newline.is_some())
        };
        reader.consume(consumed);
        if done {
            return Ok(());
        }
    }
}

/// The frame of a complete line: without its `\n` / `\r\n`.
pub fn frame_of(line: &[u8]) -> &[u8] {
    let frame = line.strip_suffix(b"\n").unwrap_or(line);
    frame.strip_suffix(b"\r").unwrap_or(frame)
}

#[cfg(test)]
mod tests {
    use tokio::io::BufReader;

    use super::*;

    #[tokio::test]
    async fn lines_are_bounded_and_the_rest_can_be_passed_on() {
        let input: &[u8] = b"{\"a\":1}\r\n0123456789abc\nlast";
        let mut reader = BufReader::with_capacity(4, input);
        let mut buf = Vec::new();
        assert!(matches!(
            read_line(&mut reader, &mut buf, 10).await,
            Line::Complete
        ));
        assert_eq!(frame_of(&buf), b"{\"a\":1}");
        assert!(matches!(
            read_line(&mut reader, &mut buf, 10).await,
            Line::Oversized
        ));
        let mut rest = Vec::new();
        pass_rest_of_line(&mut reader, Some(&mut rest))
            .await
            .unwrap();
        buf.extend_from_slice(&rest);
        assert_eq!(buf, b"0123456789abc\n");
        assert!(matches!(
            read_line(&mut reader, &mut buf, 10).await,
            Line::Complete
        ));
        assert_eq!(buf, b"last");
        assert!(matches!(
            read_line(&mut reader, &mut buf, 10).await,
            Line::Eof
        ));
    }

    #[tokio::test]
    async fn the_bound_excludes_the_newline() {
        let input: &[u8] = b"0123456789\n0123456789\r\n01234567890\n";
        let mut reader = BufReader::with_capacity(3, input);
        let mut buf = Vec::new();
        assert!(matches!(
            read_line(&mut reader, &mut buf, 10).await,
            Line::Complete
        ));
        assert_eq!(buf, b"0123456789\n");
        // `\r` counts as frame content: this frame is 11 bytes.
        assert!(matches!(
            read_line(&mut reader, &mut buf, 10).await,
            Line::Oversized
        ));
        pass_rest_of_line(&mut reader, None::<&mut Vec<u8>>)
            .await
            .unwrap();
        assert!(matches!(
            read_line(&mut reader, &mut buf, 10).await,
            Line::Oversized
        ));
    }

    #[tokio::test]
    async fn bytes_that_are_not_utf8_are_kept_unchanged() {
        let input: &[u8] = b"\xff\xfe{}\n";
        let mut reader = BufReader::new(input);
        let mut buf = Vec::new();
        assert!(matches!(
            read_line(&mut reader, &mut buf, 10).await,
            Line::Complete
        ));
        assert_eq!(frame_of(&buf), b"\xff\xfe{}");
        assert!(std::str::from_utf8(frame_of(&buf)).is_err());
    }

    #[tokio::test]
    async fn empty_input_is_eof_and_blank_lines_are_lines() {
        let mut empty: &[u8] = b"";
        let mut buf = vec![1, 2, 3];
        assert!(matches!(
            read_line(&mut empty, &mut buf, 10).await,
            Line::Eof
        ));
        assert!(buf.is_empty());
        let mut blank: &[u8] = b"\n";
        assert!(matches!(
            read_line(&mut blank, &mut buf, 0).await,
            Line::Complete
        ));
        assert_eq!(frame_of(&buf), b"");
    }

    #[tokio::test]
    async fn a_failing_reader_is_reported() {
        // Reading a directory fails (EISDIR) on every platform we build for.
        let dir = tokio::fs::File::open(env!("CARGO_MANIFEST_DIR"))
            .await
            .unwrap();
        let mut reader = BufReader::new(dir);
        let mut buf = Vec::new();
        assert!(matches!(
            read_line(&mut reader, &mut buf, 10).await,
            Line::Failed(_)
        ));
    }
}
