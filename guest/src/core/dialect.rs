//! The markdown dialect every parse of an outbound text uses.
//!
//! The splitter finds block boundaries with one parse and the renderer renders with another
//! (a piece cut from a larger block is parsed again): both must read the same dialect, or a
//! table the splitter kept whole would render as pipes. They take it from here, so neither
//! module imports the other for it.

use pulldown_cmark::Options;

/// CommonMark with tables and strikethrough: what agents write and every platform can show.
pub fn options() -> Options {
    Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH
}
