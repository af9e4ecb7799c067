//! The bytes of one connection, in the clear or under TLS. A plain connection sends
//! fetched file regions with sendfile (page cache to socket); under TLS they are read
//! in bounded chunks and encrypted by rustls, so a fetch never holds more than one chunk
//! of a response in memory.

use std::io;
use std::os::fd::BorrowedFd;
use std::pin::Pin;

use strand_protocol::ResponsePart;
use tokio::io::{AsyncRead, AsyncWriteExt, Interest, WriteHalf};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

/// The reading half of a connection.
pub type Reader = Pin<Box<dyn AsyncRead + Send>>;

/// The writing half of a connection.
pub enum Writer {
    Plain(OwnedWriteHalf),
    Tls(WriteHalf<TlsStream<TcpStream>>),
}

/// Splits a plain connection.
pub fn plain(stream: TcpStream) -> (Reader, Writer) {
    let (reader, writer) = stream.into_split();
    (Box::pin(reader), Writer::Plain(writer))
}

/// Splits a connection whose TLS handshake is done.
pub fn tls(stream: TlsStream<TcpStream>) -> (Reader, Writer) {
    let (reader, writer) = tokio::io::split(stream);
    (Box::pin(reader), Writer::Tls(writer))
}

/// Bytes of a file region read and encrypted at a time under TLS.
const TLS_FILE_CHUNK_BYTES: usize = 256 * 1024;
/// Byte parts gathered into one TLS write at most.
const TLS_GATHER_MAX_BYTES: usize = 64 * 1024;

impl Writer {
    pub async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Writer::Plain(writer) => writer.write_all(bytes).await,
            Writer::Tls(writer) => {
                writer.write_all(bytes).await?;
                writer.flush().await
            }
        }
    }

    /// Writes a response made of byte parts and file regions.
    pub async fn write_parts(&mut self, parts: &[ResponsePart]) -> io::Result<()> {
        match self {
            Writer::Plain(writer) => write_parts_plain(writer, parts).await,
            Writer::Tls(writer) => {
                // Each write to a TLS stream is its own record and socket write: the small
                // byte parts between file regions (a fetch's per-partition headers) are
                // gathered first, up to a bound.
                let mut gathered: Vec<u8> = Vec::new();
                for part in parts {
                    match part {
                        ResponsePart::Bytes(bytes) => {
                            gathered.extend_from_slice(bytes);
                            if gathered.len() >= TLS_GATHER_MAX_BYTES {
                                writer.write_all(&gathered).await?;
                                gathered.clear();
                            }
                        }
                        ResponsePart::File {
                            file,
                            position,
                            length,
                        } => {
                            if !gathered.is_empty() {
                                writer.write_all(&gathered).await?;
                                gathered.clear();
                            }
                            write_file_region_tls(writer, file, *position, *length).await?
                        }
                    }
                }
                writer.write_all(&gathered).await?;
                writer.flush().await
            }
        }
    }
}

async fn write_file_region_tls(
    writer: &mut WriteHalf<TlsStream<TcpStream>>,
    file: &strand_protocol::SharedFile,
    position: u64,
    length: u64,
) -> io::Result<()> {
    let (mut position, mut remaining) = (position, length);
    let mut buffer = Vec::new();
    while remaining > 0 {
        let want = remaining.min(TLS_FILE_CHUNK_BYTES as u64) as usize;
        let file = file.clone();
        let mut chunk = std::mem::take(&mut buffer);
        chunk.resize(want, 0);
        // A read that misses the page cache blocks: off the async threads.
        let (chunk, read) = tokio::task::spawn_blocking(move || {
            // SAFETY: the descriptor belongs to the file the Arc keeps open.
            let fd = unsafe { BorrowedFd::borrow_raw(file.as_raw_fd()) };
            let read = rustix::io::pread(fd, &mut chunk[..], position).map_err(io::Error::from);
            (chunk, read)
        })
        .await
        .map_err(io::Error::other)?;
        let read = read?;
        if read == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "file shorter than the response promised",
            ));
        }
        writer.write_all(&chunk[..read]).await?;
        position += read as u64;
        remaining -= read as u64;
        buffer = chunk;
    }
    Ok(())
}

/// Writes a response made of byte parts and file regions; file regions go from the page
/// cache to the socket with sendfile, never through user space.
async fn write_parts_plain(writer: &mut OwnedWriteHalf, parts: &[ResponsePart]) -> io::Result<()> {
    // Cork the socket so the header bytes and the file regions leave as full segments,
    // not one small packet per part (the socket runs with TCP_NODELAY).
    let corked =
        parts.len() > 1 && rustix::net::sockopt::set_tcp_cork(writer.as_ref(), true).is_ok();
    let written = write_each(writer, parts).await;
    if corked {
        let _ = rustix::net::sockopt::set_tcp_cork(writer.as_ref(), false);
    }
    written
}

async fn write_each(writer: &mut OwnedWriteHalf, parts: &[ResponsePart]) -> io::Result<()> {
    for part in parts {
        match part {
            ResponsePart::Bytes(bytes) => writer.write_all(bytes).await?,
            ResponsePart::File {
                file,
                position,
                length,
            } => {
                writer.flush().await?;
                send_file(writer, file.as_raw_fd(), *position, *length).await?;
            }
        }
    }
    Ok(())
}

async fn send_file(
    writer: &OwnedWriteHalf,
    file_fd: std::os::fd::RawFd,
    position: u64,
    length: u64,
) -> io::Result<()> {
    let socket = writer.as_ref();
    let (mut position, mut remaining) = (position, length);
    while remaining > 0 {
        socket.writable().await?;
        let sent = socket.try_io(Interest::WRITABLE, || {
            // SAFETY: the descriptor belongs to a file kept open by the response part we
            // are iterating over, which outlives this call.
            let file = unsafe { BorrowedFd::borrow_raw(file_fd) };
            let mut offset = position;
            rustix::fs::sendfile(
                socket,
                file,
                Some(&mut offset),
                remaining.min(1 << 30) as usize,
            )
            .map_err(io::Error::from)
        });
        match sent {
            // The file ended early (truncated meanwhile): the frame cannot be completed.
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file shorter than the response promised",
                ))
            }
            Ok(count) => {
                position += count as u64;
                remaining -= count as u64;
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => continue,
            Err(error) => return Err(error),
        }
    }
    Ok(())
}
