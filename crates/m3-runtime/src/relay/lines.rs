//! Bounded NDJSON line reading over any buffered reader.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

/// The outcome of one [`read_line`].
#[derive(Debug)]
pub(crate) enum Line {
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
pub(crate) async fn read_line<R: AsyncBufRead + Unpin>(
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
                return if buf.is_empty() {
                    Line::Eof
                } else {
                    Line::Complete
                };
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
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
pub(crate) async fn pass_rest_of_line<R, W>(
    reader: &mut R,
    mut out: Option<&mut W>,
) -> std::io::Result<()>
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
pub(crate) fn frame_of(line: &[u8]) -> &[u8] {
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
}
