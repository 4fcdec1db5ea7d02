#![cfg(test)]
//! [`decode_streamed`] through its buffered reader: whatever sizes the
//! chunks arrive in (a byte at a time, splitting strings and escapes, or
//! larger than the buffer), the value is what the whole text decodes to,
//! and a body that is not whole JSON keeps its first bytes for the error.

use axum::body::Bytes;

use super::{ChunkSource, READ_BUFFER, Streamed, decode_streamed};

/// Chunks handed out in order.
struct Chunks(std::vec::IntoIter<Bytes>);

impl ChunkSource for Chunks {
    async fn next_chunk(&mut self) -> Result<Option<Bytes>, reqwest::Error> {
        Ok(self.0.next())
    }
}

/// `text` in chunks of the sizes of `sizes`, cycled.
fn chunks(text: &str, sizes: &[usize]) -> Chunks {
    let mut out = Vec::new();
    let mut rest = text.as_bytes();
    for size in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (head, tail) = rest.split_at((*size).min(rest.len()));
        out.push(Bytes::copy_from_slice(head));
        rest = tail;
    }
    Chunks(out.into_iter())
}

/// A list whose text is longer than the read buffer, with escapes and
/// multi-byte characters that chunk edges split.
fn list() -> String {
    let items: Vec<String> = (0..4000)
        .map(|i| format!(r#"{{"name":"p{i}","note":"tab\tquote\"é🙂\u00e9","n":{i}}}"#))
        .collect();
    let text = format!(r#"{{"items":[{}],"nextPageToken":"t"}}"#, items.join(","));
    assert!(text.len() > 2 * READ_BUFFER, "{}", text.len());
    text
}

#[tokio::test]
async fn any_chunking_decodes_to_what_the_whole_text_does() {
    let text = list();
    let whole: serde_json::Value = serde_json::from_str(&text).unwrap();
    for sizes in [
        &[1][..],
        &[1, 2, 3, 5, 7][..],
        &[READ_BUFFER - 1, 3][..],
        &[3 * READ_BUFFER][..],
    ] {
        match decode_streamed::<serde_json::Value, _>(chunks(&text, sizes)).await {
            Streamed::Done(v) => assert_eq!(v, whole, "chunk sizes {sizes:?}"),
            Streamed::Cut(e) => panic!("cut with chunk sizes {sizes:?}: {e}"),
            Streamed::Invalid { source, .. } => {
                panic!("invalid with chunk sizes {sizes:?}: {source}")
            }
        }
    }
}

#[tokio::test]
async fn a_body_cut_short_is_invalid_and_keeps_its_first_bytes() {
    let text = list();
    let cut = &text[..text.len() - 10];
    match decode_streamed::<serde_json::Value, _>(chunks(cut, &[1, 4096])).await {
        Streamed::Invalid { head, source } => {
            assert!(source.is_eof(), "{source}");
            assert_eq!(head.len(), 200);
            assert_eq!(head.as_slice(), &text.as_bytes()[..200]);
        }
        Streamed::Done(_) => panic!("a cut body decoded"),
        Streamed::Cut(e) => panic!("{e}"),
    }
    // Trailing bytes after the value are an error too.
    let trailing = format!("{text} x");
    assert!(matches!(
        decode_streamed::<serde_json::Value, _>(chunks(&trailing, &[READ_BUFFER])).await,
        Streamed::Invalid { .. }
    ));
}
