//! Lets grpcurl talk to the Unix socket as its manual shows (`grpcurl -plaintext -unix
//! /var/run/rkcm/informer.sock list`).
//!
//! grpcurl (grpc-go) sends the socket path as the HTTP/2 `:authority`; a path is not a
//! valid authority, and the HTTP/2 server (h2) resets such a stream with PROTOCOL_ERROR.
//! An authority means nothing on a Unix socket, so on those connections the incoming
//! header blocks are rewritten so the `:authority` field becomes a plain `host` header:
//! only the name index of the field's HPACK representation changes (static index 1,
//! `:authority`, becomes 38, `host`), the value and the representation type stay. The
//! client's and server's HPACK dynamic tables stay in step: the server's copy of such an
//! entry is only smaller, so it evicts no entry the client can still refer to.
//!
//! Anything that does not parse is passed through unchanged, for h2 to judge.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

const PREFACE_LEN: usize = 24;
const FRAME_HEADER_LEN: usize = 9;
const HEADERS: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
const AUTHORITY_INDEX: u64 = 1;
const HOST_INDEX: u64 = 38;
/// Larger frames than this are passed through without a look (h2's own limit is lower).
const MAX_FRAME: usize = 1 << 24;

pub struct AuthorityShim<S> {
    inner: S,
    input: BytesMut,
    output: BytesMut,
    preface_left: usize,
    passthrough: bool,
}

impl<S> AuthorityShim<S> {
    pub fn new(inner: S) -> Self {
        AuthorityShim {
            inner,
            input: BytesMut::new(),
            output: BytesMut::new(),
            preface_left: PREFACE_LEN,
            passthrough: false,
        }
    }

    /// Moves what can be decided from `input` to `output`.
    fn process(&mut self) {
        loop {
            if self.input.is_empty() {
                return;
            }
            if self.passthrough {
                let all = self.input.split();
                self.output.extend_from_slice(&all);
                return;
            }
            if self.preface_left > 0 {
                let n = self.preface_left.min(self.input.len());
                let preface = self.input.split_to(n);
                self.output.extend_from_slice(&preface);
                self.preface_left -= n;
                continue;
            }
            if self.input.len() < FRAME_HEADER_LEN {
                return;
            }
            let len = (usize::from(self.input[0]) << 16)
                | (usize::from(self.input[1]) << 8)
                | usize::from(self.input[2]);
            if len > MAX_FRAME {
                self.passthrough = true;
                continue;
            }
            if self.input.len() < FRAME_HEADER_LEN + len {
                return;
            }
            let frame_type = self.input[3];
            let flags = self.input[4];
            let frame = self.input.split_to(FRAME_HEADER_LEN + len);
            let rewritten = (frame_type == HEADERS && flags & END_HEADERS != 0)
                .then(|| rewrite_headers_payload(&frame[FRAME_HEADER_LEN..], flags))
                .flatten();
            match rewritten {
                Some(payload) => {
                    let n = payload.len();
                    self.output
                        .extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8, n as u8]);
                    self.output.extend_from_slice(&frame[3..FRAME_HEADER_LEN]);
                    self.output.extend_from_slice(&payload);
                }
                None => self.output.extend_from_slice(&frame),
            }
        }
    }
}

/// The HEADERS payload with `:authority` renamed, or None when there is nothing to do or
/// it does not parse.
fn rewrite_headers_payload(payload: &[u8], flags: u8) -> Option<Vec<u8>> {
    let mut start = 0;
    let mut pad = 0;
    if flags & PADDED != 0 {
        pad = usize::from(*payload.first()?);
        start = 1;
    }
    if flags & PRIORITY != 0 {
        start += 5;
    }
    let end = payload.len().checked_sub(pad)?;
    if start > end {
        return None;
    }
    let block = rewrite_block(&payload[start..end])?;
    let mut out = Vec::with_capacity(payload.len() + 2);
    out.extend_from_slice(&payload[..start]);
    out.extend_from_slice(&block);
    out.extend_from_slice(&payload[end..]);
    Some(out)
}

/// Reads an HPACK integer with an N-bit prefix at `pos`; returns it and the next position.
fn read_int(block: &[u8], pos: usize, prefix_bits: u8) -> Option<(u64, usize)> {
    let mask = (1u16 << prefix_bits) as u8 - 1;
    let mut value = u64::from(block.get(pos)? & mask);
    let mut pos = pos + 1;
    if value < u64::from(mask) {
        return Some((value, pos));
    }
    let mut shift = 0u32;
    loop {
        let byte = *block.get(pos)?;
        pos += 1;
        value = value.checked_add(u64::from(byte & 0x7f).checked_shl(shift)?)?;
        shift += 7;
        if byte & 0x80 == 0 || shift > 56 {
            return (byte & 0x80 == 0).then_some((value, pos));
        }
    }
}

fn write_int(out: &mut Vec<u8>, first_bits: u8, prefix_bits: u8, value: u64) {
    let mask = (1u16 << prefix_bits) as u8 - 1;
    if value < u64::from(mask) {
        out.push(first_bits | value as u8);
        return;
    }
    out.push(first_bits | mask);
    let mut rest = value - u64::from(mask);
    while rest >= 0x80 {
        out.push((rest as u8 & 0x7f) | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Skips an HPACK string literal at `pos`.
fn skip_string(block: &[u8], pos: usize) -> Option<usize> {
    let (len, pos) = read_int(block, pos, 7)?;
    let end = pos.checked_add(usize::try_from(len).ok()?)?;
    (end <= block.len()).then_some(end)
}

/// One HPACK field representation of a block.
struct Field {
    start: usize,
    /// The name's index (static 1..=61, dynamic above; 0 for a literal name), for
    /// fields; None for a table size update.
    name_index: Option<u64>,
    /// For a literal field: its type bits, index prefix width, and where its value starts.
    literal: Option<(u8, u8, usize)>,
}

/// Static table indexes 1..=14 are the pseudo-headers (:authority, :method, :path,
/// :scheme, :status).
const LAST_PSEUDO_INDEX: u64 = 14;
const STATIC_TABLE_LEN: u64 = 61;

fn parse_block(block: &[u8]) -> Option<Vec<Field>> {
    let mut fields = Vec::new();
    let mut pos = 0;
    while pos < block.len() {
        let first = block[pos];
        if first & 0x80 != 0 {
            let (index, end) = read_int(block, pos, 7)?;
            fields.push(Field {
                start: pos,
                name_index: Some(index),
                literal: None,
            });
            pos = end;
        } else if first & 0xe0 == 0x20 {
            let (_, end) = read_int(block, pos, 5)?;
            fields.push(Field {
                start: pos,
                name_index: None,
                literal: None,
            });
            pos = end;
        } else {
            // With incremental indexing (01, 6-bit index), or without / never indexed
            // (0000 / 0001, 4-bit index).
            let (type_bits, prefix) = if first & 0xc0 == 0x40 {
                (0x40, 6)
            } else {
                (first & 0xf0, 4)
            };
            let (index, after_index) = read_int(block, pos, prefix)?;
            let after_name = if index == 0 {
                skip_string(block, after_index)?
            } else {
                after_index
            };
            let end = skip_string(block, after_name)?;
            fields.push(Field {
                start: pos,
                name_index: Some(index),
                literal: Some((type_bits, prefix, after_name)),
            });
            pos = end;
        }
    }
    Some(fields)
}

/// Renames a literal `:authority` to `host`, when every field after it is certainly a
/// regular header (a pseudo-header may not follow a regular one). grpc-go sends
/// `:authority` last of the pseudo-headers, so its fields qualify; h2 clients (tonic) send
/// it before `:path`, and keep their (valid) authority.
fn rewrite_block(block: &[u8]) -> Option<Vec<u8>> {
    let fields = parse_block(block)?;
    let position = fields
        .iter()
        .position(|f| f.literal.is_some() && f.name_index == Some(AUTHORITY_INDEX))?;
    let regular_after = fields[position + 1..].iter().all(|f| match f.name_index {
        None => true,
        // A literal name is never a pseudo-header: encoders use the static table for those.
        Some(0) => f.literal.is_some(),
        Some(index) => index > LAST_PSEUDO_INDEX && index <= STATIC_TABLE_LEN,
    });
    if !regular_after {
        return None;
    }
    let field = &fields[position];
    let (type_bits, prefix, value_start) = field.literal?;
    let mut out = Vec::with_capacity(block.len() + 2);
    out.extend_from_slice(&block[..field.start]);
    write_int(&mut out, type_bits, prefix, HOST_INDEX);
    out.extend_from_slice(&block[value_start..]);
    Some(out)
}

impl<S: AsyncRead + Unpin> AsyncRead for AuthorityShim<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if !this.output.is_empty() {
                let n = this.output.len().min(buf.remaining());
                buf.put_slice(&this.output[..n]);
                this.output.advance(n);
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; 16 * 1024];
            let mut read = ReadBuf::new(&mut chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) => {
                    let filled = read.filled();
                    if filled.is_empty() {
                        // End of stream: whatever is left goes as it is.
                        let rest = this.input.split();
                        if rest.is_empty() {
                            return Poll::Ready(Ok(()));
                        }
                        this.output.extend_from_slice(&rest);
                        continue;
                    }
                    this.input.extend_from_slice(filled);
                    this.process();
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for AuthorityShim<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl<S: tonic::transport::server::Connected> tonic::transport::server::Connected
    for AuthorityShim<S>
{
    type ConnectInfo = S::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn literal(first: u8, value: &[u8]) -> Vec<u8> {
        let mut v = vec![first, value.len() as u8];
        v.extend_from_slice(value);
        v
    }

    /// :method POST, :scheme http, :path /x, :authority <path>, content-type (new name).
    fn block(authority_first_byte: u8) -> Vec<u8> {
        let mut b = vec![0x83, 0x86];
        b.extend(literal(0x44, b"/x"));
        b.extend(literal(authority_first_byte, b"/tmp/x/informer.sock"));
        b.push(0x40);
        b.extend_from_slice(&[12]);
        b.extend_from_slice(b"content-type");
        b.extend_from_slice(&[16]);
        b.extend_from_slice(b"application/grpc");
        b
    }

    fn frame(frame_type: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let n = payload.len();
        let mut f = vec![
            (n >> 16) as u8,
            (n >> 8) as u8,
            n as u8,
            frame_type,
            flags,
            0,
            0,
            0,
            1,
        ];
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn renames_the_authority_in_every_literal_form() {
        let with_indexing = rewrite_block(&block(0x41)).unwrap();
        assert_eq!(with_indexing, {
            let mut b = block(0x41);
            b[6] = 0x66;
            b
        });
        // Never indexed: a 4-bit prefix, where 38 takes two bytes.
        let never = rewrite_block(&block(0x11)).unwrap();
        assert_eq!(never.len(), block(0x11).len() + 1);
        assert_eq!(&never[6..8], &[0x1f, 38 - 15]);
        assert!(rewrite_block(&[0x83, 0x86]).is_none());
        // h2's order (:authority before :path) is left alone.
        let mut h2_order = vec![0x83, 0x86];
        h2_order.extend(literal(0x41, b"informer.local"));
        h2_order.extend(literal(0x44, b"/x"));
        assert!(rewrite_block(&h2_order).is_none());
        // Truncated input is left alone.
        assert!(rewrite_block(&block(0x41)[..8]).is_none());
    }

    #[test]
    fn integers_round_trip() {
        for (value, prefix) in [
            (0u64, 4u8),
            (14, 4),
            (15, 4),
            (38, 4),
            (1337, 5),
            (300_000, 7),
        ] {
            let mut out = Vec::new();
            write_int(&mut out, 0, prefix, value);
            assert_eq!(read_int(&out, 0, prefix), Some((value, out.len())));
        }
    }

    #[tokio::test]
    async fn rewrites_headers_frames_and_passes_everything_else() {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let mut shim = AuthorityShim::new(server);
        let mut sent = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        let settings = frame(0x4, 0, &[]);
        sent.extend(&settings);
        // PADDED + PRIORITY HEADERS.
        let mut payload = vec![2u8, 0, 0, 0, 0, 16];
        payload.extend(block(0x41));
        payload.extend([0, 0]);
        sent.extend(frame(HEADERS, END_HEADERS | PADDED | PRIORITY, &payload));
        let data = frame(0x0, 0x1, b"hello");
        sent.extend(&data);
        client.write_all(&sent).await.unwrap();
        drop(client);
        let mut received = Vec::new();
        shim.read_to_end(&mut received).await.unwrap();
        assert_eq!(received.len(), sent.len());
        let headers_at = PREFACE_LEN + settings.len();
        assert_eq!(&received[..headers_at], &sent[..headers_at]);
        // The authority's first byte, after the 9-byte header, pad length and priority.
        let authority_byte = headers_at + FRAME_HEADER_LEN + 6 + 6;
        assert_eq!(sent[authority_byte], 0x41);
        assert_eq!(received[authority_byte], 0x66);
        assert_eq!(&received[received.len() - data.len()..], &data[..]);
    }
}
