//! Length-prefixed frames: a 4-byte big-endian size, then that many bytes. The size is
//! checked against `socket.request.max.bytes` before anything is allocated; the body is
//! read against the listener's memory budget by [`crate::request_memory`].

use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt};

/// Kafka's socket.request.max.bytes default: 100 MiB.
pub const SOCKET_REQUEST_MAX_BYTES_DEFAULT: usize = 100 * 1024 * 1024;

#[derive(Debug, Error)]
pub enum FrameError {
    #[error("frame of {size_bytes} bytes exceeds socket.request.max.bytes ({limit_bytes})")]
    TooLarge { size_bytes: i64, limit_bytes: usize },
    #[error("negative or empty frame size {0}")]
    BadSize(i32),
    #[error("connection closed inside a frame")]
    Truncated,
    #[error("frame body of {size_bytes} bytes did not arrive in time")]
    TimedOut { size_bytes: usize },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Reads the next frame's size. `Ok(None)` when the peer closed cleanly between frames.
pub async fn read_frame_size<R: AsyncRead + Unpin>(
    reader: &mut R,
    limit_bytes: usize,
) -> Result<Option<usize>, FrameError> {
    let mut size = [0u8; 4];
    let mut filled = 0;
    while filled < size.len() {
        let read = reader.read(&mut size[filled..]).await?;
        if read == 0 {
            return if filled == 0 {
                Ok(None)
            } else {
                Err(FrameError::Truncated)
            };
        }
        filled += read;
    }
    let size = i32::from_be_bytes(size);
    if size <= 0 {
        return Err(FrameError::BadSize(size));
    }
    if size as usize > limit_bytes {
        return Err(FrameError::TooLarge {
            size_bytes: size as i64,
            limit_bytes,
        });
    }
    Ok(Some(size as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_frames_and_refuses_oversized_ones() {
        let mut input: &[u8] = &[0, 0, 0, 3, b'a', b'b', b'c', 0, 0, 0, 9];
        let size = read_frame_size(&mut input, 8).await.unwrap().unwrap();
        assert_eq!(size, 3);
        input = &input[3..];
        assert!(matches!(
            read_frame_size(&mut input, 8).await,
            Err(FrameError::TooLarge { size_bytes: 9, .. })
        ));
    }

    #[tokio::test]
    async fn clean_close_truncation_and_bad_sizes() {
        let mut empty: &[u8] = &[];
        assert!(read_frame_size(&mut empty, 8).await.unwrap().is_none());
        let mut partial: &[u8] = &[0, 0];
        assert!(matches!(
            read_frame_size(&mut partial, 8).await,
            Err(FrameError::Truncated)
        ));
        let mut negative: &[u8] = &[0xff, 0xff, 0xff, 0xff];
        assert!(matches!(
            read_frame_size(&mut negative, 8).await,
            Err(FrameError::BadSize(-1))
        ));
    }
}
