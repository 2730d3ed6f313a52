//! Reading JSON-lines streams from another process: pi's stdout and the agent link.
//!
//! Records end at `\n` only (pi's framing rule: U+2028 inside a JSON string is not a
//! break), a trailing `\r` is dropped, invalid UTF-8 is replaced rather than fatal, and a
//! record longer than the cap is skipped and reported instead of growing memory without
//! bound. tokio's `read_until` has no cap and tokio-util's line codecs end the stream on
//! the first oversized or non-UTF-8 record, so this small reader exists.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// One record read from the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A complete line, without its terminator.
    Line(String),
    /// A line longer than the cap was skipped; the payload is its length in bytes.
    TooLong(usize),
}

/// Reads the next record; `None` at the end of the stream. A last line without a
/// terminator still counts as a line.
pub async fn next_record<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    cap: usize,
) -> std::io::Result<Option<Record>> {
    let mut line: Vec<u8> = Vec::new();
    let mut skipped: usize = 0;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            if skipped > 0 {
                return Ok(Some(Record::TooLong(skipped)));
            }
            if line.is_empty() {
                return Ok(None);
            }
            return Ok(Some(Record::Line(finish(line))));
        }
        let (chunk, done) = match available.iter().position(|b| *b == b'\n') {
            Some(i) => (&available[..i], i + 1),
            None => (available, available.len()),
        };
        let complete = done > chunk.len();
        if skipped > 0 || line.len() + chunk.len() > cap {
            skipped += line.len() + chunk.len();
            line.clear();
        } else {
            line.extend_from_slice(chunk);
        }
        reader.consume(done);
        if complete {
            if skipped > 0 {
                return Ok(Some(Record::TooLong(skipped)));
            }
            return Ok(Some(Record::Line(finish(line))));
        }
    }
}

fn finish(mut line: Vec<u8>) -> String {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    String::from_utf8_lossy(&line).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn all(input: &[u8], cap: usize) -> Vec<Record> {
        // A tiny buffer makes records span many fills, the case that needs care.
        let mut reader = tokio::io::BufReader::with_capacity(3, input);
        let mut records = Vec::new();
        while let Some(record) = next_record(&mut reader, cap).await.expect("in-memory read") {
            records.push(record);
        }
        records
    }

    #[tokio::test]
    async fn splits_on_newline_only_and_drops_a_trailing_cr() {
        let input = "{\"a\":\"x\u{2028}y\"}\r\n{\"b\":1}\nlast".as_bytes();
        assert_eq!(
            all(input, 100).await,
            vec![
                Record::Line("{\"a\":\"x\u{2028}y\"}".into()),
                Record::Line("{\"b\":1}".into()),
                Record::Line("last".into()),
            ]
        );
    }

    #[tokio::test]
    async fn an_oversized_line_is_skipped_and_reading_goes_on() {
        let input = b"0123456789\nok\n0123456789";
        assert_eq!(
            all(input, 5).await,
            vec![
                Record::TooLong(10),
                Record::Line("ok".into()),
                Record::TooLong(10)
            ]
        );
    }

    #[tokio::test]
    async fn invalid_utf8_is_replaced_not_fatal() {
        assert_eq!(
            all(b"a\xffb\n\n", 100).await,
            vec![
                Record::Line("a\u{fffd}b".into()),
                Record::Line(String::new())
            ]
        );
    }
}
