//! Reads a `multipart/form-data` body (RFC 7578) the way the platforms' servers do, so a
//! loopback server can check each part an upload really carried: its field name, its file
//! name, its media type and its bytes. Strict on purpose: a body a real server would
//! refuse (no boundary, a part without `Content-Disposition`, no closing delimiter) is an
//! error here too, so a malformed upload fails the test instead of passing unread.

/// One part of a form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The `name` of its `Content-Disposition`.
    pub name: String,
    /// The `filename`, for a file part.
    pub file_name: Option<String>,
    /// Its `Content-Type`, when given.
    pub content_type: Option<String>,
    /// Its bytes.
    pub data: Vec<u8>,
}

impl Part {
    /// The bytes as text (lossy), for the form's text fields.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.data).into_owned()
    }
}

/// The boundary of a `multipart/form-data` content type.
pub fn boundary(content_type: &str) -> Option<String> {
    let (kind, params) = content_type.split_once(';')?;
    if !kind.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    params.split(';').find_map(|param| {
        let (key, value) = param.split_once('=')?;
        key.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| value.trim().trim_matches('"').to_owned())
    })
}

/// The parts of `body`, sent with `content_type`.
pub fn parse(content_type: &str, body: &[u8]) -> Result<Vec<Part>, String> {
    let boundary = boundary(content_type)
        .ok_or_else(|| format!("not multipart/form-data with a boundary: {content_type:?}"))?;
    let delimiter = format!("--{boundary}").into_bytes();
    let mut rest = body
        .strip_prefix(delimiter.as_slice())
        .ok_or("the body does not start with the boundary")?;
    let mut parts = Vec::new();
    loop {
        if rest.starts_with(b"--") {
            return Ok(parts);
        }
        rest = rest
            .strip_prefix(b"\r\n")
            .ok_or("a boundary is not followed by CRLF")?;
        let head_end = find(rest, b"\r\n\r\n").ok_or("a part has no end of headers")?;
        let head = std::str::from_utf8(&rest[..head_end]).map_err(|_| "headers are not UTF-8")?;
        rest = &rest[head_end + 4..];
        let mut closing = b"\r\n".to_vec();
        closing.extend_from_slice(&delimiter);
        let end = closing_at(rest, &closing).ok_or("a part is not closed by the boundary")?;
        parts.push(part(head, rest[..end].to_vec())?);
        rest = &rest[end + closing.len()..];
    }
}

fn part(head: &str, data: Vec<u8>) -> Result<Part, String> {
    let mut name = None;
    let mut file_name = None;
    let mut content_type = None;
    for line in head.split("\r\n") {
        let Some((key, value)) = line.split_once(':') else {
            return Err(format!("a header line without a colon: {line:?}"));
        };
        if key.trim().eq_ignore_ascii_case("content-disposition") {
            for param in value.split(';').skip(1) {
                if let Some((k, v)) = param.split_once('=') {
                    let v = v.trim().trim_matches('"').to_owned();
                    match k.trim() {
                        "name" => name = Some(v),
                        "filename" => file_name = Some(v),
                        _ => {}
                    }
                }
            }
        } else if key.trim().eq_ignore_ascii_case("content-type") {
            content_type = Some(value.trim().to_owned());
        }
    }
    Ok(Part {
        name: name.ok_or("a part without a Content-Disposition name")?,
        file_name,
        content_type,
        data,
    })
}

/// Where the part's closing delimiter starts: a delimiter is one only when a CRLF or the
/// final `--` follows it (RFC 2046), so `--boundaryX` inside the data is data.
fn closing_at(data: &[u8], closing: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = find(&data[from..], closing) {
        let end = from + at + closing.len();
        let next = &data[end..];
        if next.starts_with(b"\r\n") || next.starts_with(b"--") {
            return Some(from + at);
        }
        from += at + 1;
    }
    None
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_is_read_back_part_by_part_and_a_cut_one_is_refused() {
        // A boundary-like line inside the file must not end the part.
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"chat_id\"\r\n\r\n42\r\n--XyZ\r\nContent-Disposition: form-data; name=\"document\"; filename=\"notes.txt\"\r\nContent-Type: text/plain\r\n\r\na\r\n--XyZW\r\nb\r\n--XyZ--\r\n";
        let content_type = "multipart/form-data; boundary=XyZ";
        let parts = parse(content_type, body).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(
            (parts[0].name.as_str(), parts[0].text().as_str()),
            ("chat_id", "42")
        );
        assert_eq!(parts[0].file_name, None);
        assert_eq!(parts[1].file_name.as_deref(), Some("notes.txt"));
        assert_eq!(parts[1].content_type.as_deref(), Some("text/plain"));
        assert_eq!(parts[1].data, b"a\r\n--XyZW\r\nb");
        assert!(parse("application/json", body).is_err());
        assert!(parse(content_type, &body[..body.len() - 12]).is_err());
        assert_eq!(
            boundary("multipart/form-data; boundary=\"q r\""),
            Some("q r".into())
        );
    }
}
