//! Files clients upload (`UploadFile`) and files offered for download (`DownloadFile`),
//! kept in memory, bounded in size per file and in count.
//!
//! Why in memory: an upload lives only as long as the prompt that refers to it, and
//! nothing on disk means no permissions to get wrong and nothing left behind. The count
//! bound keeps memory at most `max_files × max_bytes`; when it is reached the oldest file
//! is forgotten (a later fetch of it fails with a message that says why).
//!
//! The media type of a stored file is what its bytes say (magic numbers), never what a
//! client claims: the bridge checks it against its allowed types (I25).

use std::collections::VecDeque;
use std::sync::Arc;

use transport_core::{Attachment, AttachmentKind};

use crate::proto::FileChunk;

/// Bytes per `FileChunk` in a download (well under gRPC's 4 MiB default message limit).
pub const CHUNK_BYTES: usize = 64 * 1024;

/// Longest file name kept, in characters.
const MAX_NAME_CHARS: usize = 255;

/// One stored file.
#[derive(Debug, Clone)]
pub struct StoredFile {
    /// File name as the client gave it (or as offered).
    pub name: String,
    /// Media type from the bytes.
    pub media_type: String,
    /// The bytes.
    pub data: Arc<[u8]>,
    /// The client that uploaded it (with per-client tokens); only it may download it or
    /// attach it. `None`: anyone allowed to connect may (no clients configured, or a file
    /// the bridge offered).
    pub owner: Option<String>,
}

impl StoredFile {
    /// True when a caller known as `owner` (see [`crate::clients::Access::owner`]) may
    /// read this file: one client's upload is invisible to every other client.
    pub fn readable_by(&self, owner: Option<&str>) -> bool {
        self.owner.is_none() || self.owner.as_deref() == owner
    }
}

/// The bounded store.
#[derive(Debug)]
pub struct Files {
    max_files: usize,
    entries: VecDeque<(String, StoredFile)>,
    forgotten: u64,
}

impl Files {
    /// An empty store keeping at most `max_files` files (at least one).
    pub fn new(max_files: usize) -> Files {
        Files {
            max_files: max_files.max(1),
            entries: VecDeque::new(),
            forgotten: 0,
        }
    }

    /// Stores `file` under `id`, forgetting the oldest file when the store is full.
    pub fn insert(&mut self, id: String, file: StoredFile) {
        while self.entries.len() >= self.max_files {
            self.entries.pop_front();
            self.forgotten += 1;
        }
        self.entries.push_back((id, file));
    }

    /// The file stored under `id`.
    pub fn get(&self, id: &str) -> Option<StoredFile> {
        self.entries
            .iter()
            .find(|(stored, _)| stored == id)
            .map(|(_, file)| file.clone())
    }

    /// Files stored now.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes stored now.
    pub fn bytes(&self) -> usize {
        self.entries.iter().map(|(_, file)| file.data.len()).sum()
    }

    /// Files forgotten to make room so far.
    pub fn forgotten(&self) -> u64 {
        self.forgotten
    }

    /// Most files kept at once.
    pub fn capacity(&self) -> usize {
        self.max_files
    }

    /// Fills in what the store knows about an attachment a message refers to: its size,
    /// and, when the client declared no media type, the type its bytes have.
    pub fn describe(&self, attachment: &mut Attachment) {
        let Some(file) = self.get(&attachment.reference) else {
            return;
        };
        attachment.size_bytes = Some(file.data.len() as u64);
        if attachment.media_type == "application/octet-stream" {
            attachment.media_type = file.media_type.clone();
            if file.media_type.starts_with("image/") {
                attachment.kind = AttachmentKind::Image;
            }
        }
        if attachment.name.is_none() {
            attachment.name = Some(file.name);
        }
    }
}

/// The media type of `data` from its magic numbers; `application/octet-stream` when
/// nothing matches.
pub fn sniff_media_type(data: &[u8]) -> String {
    infer::get(data).map_or_else(
        || "application/octet-stream".to_owned(),
        |kind| kind.mime_type().to_owned(),
    )
}

/// Why an upload was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UploadError {
    /// More bytes than the limit; the upload was discarded.
    #[error(
        "the file is larger than the {limit} byte upload limit (maxUploadBytes); it was not stored"
    )]
    TooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// The stream ended without a byte.
    #[error("the upload carried no bytes; nothing was stored")]
    Empty,
}

/// Collects an upload's chunks, refusing as soon as it passes the size limit.
#[derive(Debug)]
pub struct Upload {
    max_bytes: u64,
    name: Option<String>,
    data: Vec<u8>,
    finished: bool,
}

impl Upload {
    /// An upload of at most `max_bytes`.
    pub fn new(max_bytes: u64) -> Upload {
        Upload {
            max_bytes,
            name: None,
            data: Vec::new(),
            finished: false,
        }
    }

    /// Takes one chunk. The first non-empty `filename` names the file; failing that, the
    /// first non-empty `file_id` (the proto lets a client carry the name there). The server
    /// stops reading after the chunk marked `is_last`.
    pub fn push(&mut self, chunk: FileChunk) -> Result<(), UploadError> {
        if self.name.is_none() {
            self.name = [chunk.filename.as_str(), chunk.file_id.as_str()]
                .into_iter()
                .map(clean_name)
                .find(|name| !name.is_empty());
        }
        let size = self.data.len() as u64 + chunk.data.len() as u64;
        if size > self.max_bytes {
            self.data = Vec::new();
            return Err(UploadError::TooLarge {
                limit: self.max_bytes,
            });
        }
        self.data.extend_from_slice(&chunk.data);
        self.finished = chunk.is_last;
        Ok(())
    }

    /// True once the chunk marked `is_last` was taken.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The stored form of the upload.
    pub fn finish(self) -> Result<StoredFile, UploadError> {
        if self.data.is_empty() {
            return Err(UploadError::Empty);
        }
        Ok(StoredFile {
            name: self.name.unwrap_or_else(|| "upload".to_owned()),
            media_type: sniff_media_type(&self.data),
            data: self.data.into(),
            owner: None,
        })
    }
}

/// A file name without control characters, trimmed, at most 255 characters.
fn clean_name(name: &str) -> String {
    name.chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME_CHARS)
        .collect::<String>()
        .trim()
        .to_owned()
}

/// The chunks a download of `file` (stored as `id`) is sent in: the name in the first,
/// `is_last` on the last.
pub fn download_chunks(id: &str, file: &StoredFile) -> Vec<FileChunk> {
    let pieces: Vec<&[u8]> = file.data.chunks(CHUNK_BYTES).collect();
    let count = pieces.len();
    pieces
        .into_iter()
        .enumerate()
        .map(|(index, piece)| FileChunk {
            file_id: id.to_owned(),
            data: piece.to_vec(),
            is_last: index + 1 == count,
            filename: if index == 0 {
                file.name.clone()
            } else {
                String::new()
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = &[0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 0];

    fn chunk(data: &[u8], name: &str, last: bool) -> FileChunk {
        FileChunk {
            file_id: String::new(),
            data: data.to_vec(),
            is_last: last,
            filename: name.to_owned(),
        }
    }

    fn stored(name: &str, data: &[u8]) -> StoredFile {
        StoredFile {
            name: name.to_owned(),
            media_type: sniff_media_type(data),
            data: data.into(),
            owner: None,
        }
    }

    #[test]
    fn an_upload_is_named_by_its_first_chunk_and_typed_by_its_bytes() {
        let mut upload = Upload::new(100);
        upload
            .push(chunk(&PNG[..4], "cat\u{7}.png", false))
            .expect("fits");
        upload
            .push(chunk(&PNG[4..], "ignored.txt", true))
            .expect("fits");
        assert!(upload.is_finished());
        let file = upload.finish().expect("bytes");
        assert_eq!(file.name, "cat.png");
        assert_eq!(file.media_type, "image/png");
        assert_eq!(&*file.data, PNG);
    }

    #[test]
    fn the_file_id_field_can_carry_the_name() {
        let mut upload = Upload::new(100);
        upload
            .push(FileChunk {
                file_id: "notes.txt".into(),
                ..chunk(b"hello", "", true)
            })
            .expect("fits");
        let file = upload.finish().expect("bytes");
        assert_eq!(file.name, "notes.txt");
        assert_eq!(file.media_type, "application/octet-stream");
    }

    #[test]
    fn an_upload_over_the_limit_or_empty_is_refused() {
        let mut upload = Upload::new(4);
        upload
            .push(chunk(b"1234", "a", false))
            .expect("exactly the limit");
        assert_eq!(
            upload.push(chunk(b"5", "", false)),
            Err(UploadError::TooLarge { limit: 4 })
        );
        assert_eq!(Upload::new(4).finish().err(), Some(UploadError::Empty));
    }

    #[test]
    fn the_store_forgets_the_oldest_file_when_full() {
        let mut files = Files::new(2);
        files.insert("a".into(), stored("a", b"1"));
        files.insert("b".into(), stored("b", b"22"));
        files.insert("c".into(), stored("c", b"333"));
        assert!(files.get("a").is_none());
        assert_eq!(files.get("c").map(|file| file.name), Some("c".to_owned()));
        assert_eq!((files.len(), files.bytes(), files.forgotten()), (2, 5, 1));
    }

    #[test]
    fn a_referenced_upload_fills_in_size_type_and_name() {
        let mut files = Files::new(2);
        files.insert("f1".into(), stored("cat.png", PNG));
        let mut attachment = Attachment {
            kind: AttachmentKind::File,
            media_type: "application/octet-stream".into(),
            reference: "f1".into(),
            name: None,
            size_bytes: None,
            duration_seconds: None,
        };
        files.describe(&mut attachment);
        assert_eq!(attachment.kind, AttachmentKind::Image);
        assert_eq!(attachment.media_type, "image/png");
        assert_eq!(attachment.size_bytes, Some(PNG.len() as u64));
        assert_eq!(attachment.name.as_deref(), Some("cat.png"));
    }

    #[test]
    fn a_download_is_chunked_with_the_name_first_and_the_last_marked() {
        let data = vec![7u8; CHUNK_BYTES * 2 + 1];
        let chunks = download_chunks("f1", &stored("big.bin", &data));
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks[0].filename, "big.bin");
        assert!(chunks[1].filename.is_empty());
        assert_eq!(
            chunks.iter().map(|c| c.is_last).collect::<Vec<_>>(),
            [false, false, true]
        );
        let joined: Vec<u8> = chunks.iter().flat_map(|c| c.data.clone()).collect();
        assert_eq!(joined, data);
    }
}
