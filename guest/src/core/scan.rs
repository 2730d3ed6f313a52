//! Finding a few ASCII bytes in text: the first of them, eight bytes per step, or each of
//! them, a block at a time.
//!
//! Rendering and chunking both look for the handful of bytes that need work (`<`, `&`, …) in
//! text that is almost all plain. Testing byte by byte was a tenth of the pipeline's cost on
//! long replies; a word-at-a-time test runs the same on native and wasm32 builds.
//! Redaction looks at every trigger byte of its shapes and every markdown delimiter, which
//! agent text holds every few dozen bytes: restarting a search after each one cost as much
//! as the search, so [`positions_of`] reads a block once and hands out each match in it.

const LOW: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Position of the first byte of `bytes` that is one of `needles` (ASCII).
pub fn find_byte_of<const N: usize>(bytes: &[u8], needles: [u8; N]) -> Option<usize> {
    // A byte equal to a needle becomes zero after the XOR; the classic zero-byte test flags
    // it. Bits above a true zero can be flagged falsely, never below, so the lowest flag is
    // the first match.
    let mut chunks = bytes.chunks_exact(8);
    let mut base = 0;
    for chunk in chunks.by_ref() {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let v = u64::from_le_bytes(word);
        let flags = needles.iter().fold(0, |acc, n| {
            let x = v ^ (LOW * u64::from(*n));
            acc | (x.wrapping_sub(LOW) & !x & HIGH)
        });
        if flags != 0 {
            return Some(base + (flags.trailing_zeros() / 8) as usize);
        }
        base += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|b| needles.contains(b))
        .map(|i| base + i)
}

/// Bytes read at once by [`positions_of`].
const BLOCK: usize = 32;

/// A bit for each byte of `block` (at most [`BLOCK`] bytes) that is one of `needles`, bit
/// `k` for `block[k]`. The compares over a whole block become vector compares natively,
/// and each word's eight flags are gathered into a byte with one multiply.
#[inline(always)]
fn block_mask<const N: usize>(block: &[u8], needles: &[u8; N]) -> u32 {
    let mut padded = [0; BLOCK];
    let whole: &[u8; BLOCK] = match block.try_into() {
        Ok(whole) => whole,
        Err(_) => {
            // Padding matches nothing: every needle is printable ASCII (checked below).
            let len = block.len().min(BLOCK);
            padded[..len].copy_from_slice(&block[..len]);
            &padded
        }
    };
    let mut flags = [0u8; BLOCK];
    for (flag, b) in flags.iter_mut().zip(whole) {
        *flag = needles.iter().fold(0, |any, n| any | u8::from(b == n));
    }
    let mut mask = 0;
    for (i, eight) in flags.chunks_exact(8).enumerate() {
        let word = u64::from_le_bytes(eight.try_into().unwrap_or_default());
        // Each byte is 0 or 1, and byte k's flag lands at bit 56 + k of the product; no two
        // partial products share a bit, so nothing carries into the top byte.
        let bits = word.wrapping_mul(0x0102_0408_1020_4080) >> 56;
        mask |= u32::try_from(bits).unwrap_or_default() << (8 * i);
    }
    mask
}

/// Every position in `bytes` of a byte that is one of `needles` (printable ASCII), in
/// order.
pub fn positions_of<const N: usize>(bytes: &[u8], needles: [u8; N]) -> Positions<'_, N> {
    debug_assert!(needles.iter().all(|n| n.is_ascii_graphic()));
    Positions {
        blocks: bytes.chunks(BLOCK),
        needles,
        next_base: 0,
        base: 0,
        mask: 0,
    }
}

/// The iterator of [`positions_of`]: one block's matches at a time.
pub struct Positions<'a, const N: usize> {
    blocks: std::slice::Chunks<'a, u8>,
    needles: [u8; N],
    /// Where the next block starts.
    next_base: usize,
    /// Where the block of `mask` starts.
    base: usize,
    /// The matches of the current block not handed out yet.
    mask: u32,
}

impl<const N: usize> Iterator for Positions<'_, N> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        while self.mask == 0 {
            let block = self.blocks.next()?;
            self.base = self.next_base;
            self.next_base += block.len();
            self.mask = block_mask(block, &self.needles);
        }
        let k = self.mask.trailing_zeros() as usize;
        self.mask &= self.mask - 1;
        Some(self.base + k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The word-at-a-time search agrees with a plain scan, wherever the match lies in a
        /// word and whatever non-ASCII bytes surround it.
        #[test]
        fn finds_what_a_plain_scan_finds(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let needles = [b'<', b'&', b'>', b'"'];
            let plain = bytes.iter().position(|b| needles.contains(b));
            prop_assert_eq!(find_byte_of(&bytes, needles), plain);
            prop_assert_eq!(find_byte_of(&bytes, [b'\n']), bytes.iter().position(|b| *b == b'\n'));
        }

        /// Each match is found once and in order, in any block and at any block's edge.
        #[test]
        fn positions_are_those_a_plain_scan_finds(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let needles = [b'*', b'|', b'-', b'A'];
            let plain: Vec<usize> = (0..bytes.len()).filter(|i| needles.contains(&bytes[*i])).collect();
            prop_assert_eq!(positions_of(&bytes, needles).collect::<Vec<_>>(), plain);
        }
    }

    #[test]
    fn a_match_after_a_zero_byte_is_found_at_its_place() {
        // 0x00 then the needle: the borrow from the zero must not hide or move the match.
        assert_eq!(find_byte_of(b"ab\x00<cdefgh", [b'<']), Some(3));
        assert_eq!(find_byte_of(b"abcdefgh&", [b'<', b'&']), Some(8));
        assert_eq!(find_byte_of(b"", [b'<']), None);
    }
}
