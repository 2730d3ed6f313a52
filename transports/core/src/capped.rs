//! A download body with a byte cap (I19): every platform fetches attachments, and each must
//! refuse a file over the caller's limit both when the server declares its size and when it
//! sends more than it declared (a server may declare nothing, or lie). Pure: the caller
//! reads the chunks and stops at the first refusal, which closes the connection.

/// Why a capped body was refused, in words the person who sent the file can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OverCap {
    /// The server declared a size over the limit: nothing was read.
    #[error("the attachment is {size} bytes, over the {limit} byte limit; it was not downloaded")]
    Declared {
        /// The declared size.
        size: u64,
        /// The caller's limit.
        limit: u64,
    },
    /// More bytes than the limit arrived; reading stopped there.
    #[error("the attachment is larger than the {limit} byte limit; the download was stopped there")]
    Received {
        /// The caller's limit.
        limit: u64,
    },
}

/// The bytes received so far, never more than the limit.
#[derive(Debug)]
pub struct CappedBody {
    limit: u64,
    data: Vec<u8>,
}

impl CappedBody {
    /// Starts a body of at most `limit` bytes; refuses a declared size over it at once.
    pub fn new(declared: Option<u64>, limit: u64) -> Result<CappedBody, OverCap> {
        match declared {
            Some(size) if size > limit => Err(OverCap::Declared { size, limit }),
            _ => Ok(CappedBody {
                limit,
                data: Vec::new(),
            }),
        }
    }

    /// Adds a received chunk, or refuses it when the total would pass the limit.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), OverCap> {
        let total = u64::try_from(self.data.len().saturating_add(chunk.len())).unwrap_or(u64::MAX);
        if total > self.limit {
            return Err(OverCap::Received { limit: self.limit });
        }
        self.data.extend_from_slice(chunk);
        Ok(())
    }

    /// The whole body.
    pub fn into_bytes(self) -> Vec<u8> {
        self.data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(declared: Option<u64>, limit: u64, chunks: &[&[u8]]) -> Result<Vec<u8>, OverCap> {
        let mut body = CappedBody::new(declared, limit)?;
        for chunk in chunks {
            body.push(chunk)?;
        }
        Ok(body.into_bytes())
    }

    #[test]
    fn a_body_within_the_limit_is_kept_whole() {
        assert_eq!(read(Some(5), 5, &[b"ab", b"cde"]), Ok(b"abcde".to_vec()));
        assert_eq!(read(None, 5, &[]), Ok(Vec::new()));
    }

    #[test]
    fn a_declared_size_over_the_limit_is_refused_before_reading() {
        assert_eq!(
            CappedBody::new(Some(6), 5).map(CappedBody::into_bytes),
            Err(OverCap::Declared { size: 6, limit: 5 })
        );
    }

    #[test]
    fn more_bytes_than_the_limit_are_refused_whatever_was_declared() {
        assert_eq!(
            read(Some(2), 5, &[b"abc", b"def"]),
            Err(OverCap::Received { limit: 5 })
        );
        assert_eq!(
            read(None, 5, &[b"abcdef"]),
            Err(OverCap::Received { limit: 5 })
        );
    }
}
