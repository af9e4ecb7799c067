//! The remote store: an `object_store` (S3 and any S3-compatible server, a local
//! directory, memory; GCS and Azure with the `gcs-azure` feature) under one key prefix, with the few operations tiered storage
//! needs. Every object is written whole by one PUT (or one multipart upload, which S3
//! makes visible only when complete), so no reader ever sees half an object.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::StreamExt;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};
use strand_log::file_cache::SegmentFiles;
use strand_log::throttle::Throttle;

/// Objects larger than this go up in parts of this size (S3's smallest part is 5 MiB).
const PART_BYTES: usize = 8 * 1024 * 1024;
/// Parts of one object in flight at once: what an upload buffers is bounded by it.
const PARTS_IN_FLIGHT: usize = 2;

pub type StoreResult<T> = Result<T, object_store::Error>;

#[derive(Debug, Clone)]
pub struct RemoteStore {
    store: Arc<dyn ObjectStore>,
    url: String,
}

impl RemoteStore {
    /// Opens the store a `strand.remote.storage.url` names. S3 takes its credentials,
    /// region and endpoint from the standard AWS environment (AWS_ACCESS_KEY_ID,
    /// AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL; an http:// endpoint is allowed),
    /// GCS and Azure from theirs.
    pub fn open(url: &str) -> Result<RemoteStore, String> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| format!("{url}: not a URL (s3://BUCKET/PREFIX, file:///DIR, ...)"))?;
        let prefix = |rest: &str| -> Path {
            Path::from(rest.split_once('/').map_or("", |(_, prefix)| prefix))
        };
        let failed = |e: object_store::Error| format!("{url}: {e}");
        // The HTTP client's TLS takes the process's rustls provider: ring, as Strand's
        // listeners use (an error means one is installed already).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let store: Arc<dyn ObjectStore> = match scheme {
            "s3" | "s3a" => {
                let endpoint_is_http = ["AWS_ENDPOINT_URL", "AWS_ENDPOINT", "AWS_ENDPOINT_URL_S3"]
                    .iter()
                    .any(|name| std::env::var(name).is_ok_and(|v| v.starts_with("http://")));
                let mut s3 = object_store::aws::AmazonS3Builder::from_env()
                    .with_url(url)
                    .with_allow_http(endpoint_is_http);
                // UNSIGNED-PAYLOAD unless AWS_UNSIGNED_PAYLOAD=false: hashing every byte
                // for the signature was half the broker's CPU while copying, and adds
                // nothing the record batches' CRC32C (checked by consumers) and TLS do not
                // give already; AWS's own SDKs send S3 bodies unsigned over HTTPS.
                if std::env::var_os("AWS_UNSIGNED_PAYLOAD").is_none() {
                    s3 = s3.with_unsigned_payload(true);
                }
                let s3 = s3.build().map_err(failed)?;
                Arc::new(PrefixStore::new(s3, prefix(rest)))
            }
            #[cfg(feature = "gcs-azure")]
            "gs" => {
                let gcs = object_store::gcp::GoogleCloudStorageBuilder::from_env()
                    .with_url(url)
                    .build()
                    .map_err(failed)?;
                Arc::new(PrefixStore::new(gcs, prefix(rest)))
            }
            #[cfg(feature = "gcs-azure")]
            "az" | "azure" | "abfs" | "abfss" => {
                let azure = object_store::azure::MicrosoftAzureBuilder::from_env()
                    .with_url(url)
                    .build()
                    .map_err(failed)?;
                Arc::new(PrefixStore::new(azure, prefix(rest)))
            }
            #[cfg(not(feature = "gcs-azure"))]
            "gs" | "az" | "azure" | "abfs" | "abfss" => {
                return Err(format!(
                "{url}: this build has no {scheme} store (build with --features strand/gcs-azure)"
            ))
            }
            "file" => {
                std::fs::create_dir_all(rest).map_err(|e| format!("{url}: {e}"))?;
                Arc::new(
                    object_store::local::LocalFileSystem::new_with_prefix(rest).map_err(failed)?,
                )
            }
            "memory" => Arc::new(object_store::memory::InMemory::new()),
            other => {
                return Err(format!(
                    "{url}: unknown scheme {other} (s3, gs, az, file or memory)"
                ))
            }
        };
        Ok(RemoteStore {
            store,
            url: url.to_string(),
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub async fn put(&self, key: &str, bytes: Bytes) -> StoreResult<()> {
        self.store
            .put(&Path::from(key), PutPayload::from_bytes(bytes))
            .await
            .map(|_| ())
    }

    /// Copies the first `len` bytes of one of a segment's files (`pick`): one PUT when
    /// small, else a multipart upload of `PART_BYTES` parts with at most
    /// `PARTS_IN_FLIGHT` buffered, each part read only when `throttle`'s rate allows.
    pub async fn put_file(
        &self,
        key: &str,
        file: &LocalFile,
        len: u64,
        throttle: &Mutex<Throttle>,
    ) -> StoreResult<()> {
        let owed = |bytes: u64| {
            throttle
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .owed(bytes)
        };
        if len as usize <= PART_BYTES {
            tokio::time::sleep(owed(len)).await;
            let bytes = read_at(file, 0..len).await?;
            return self.put(key, bytes).await;
        }
        let upload = self.store.put_multipart(&Path::from(key)).await?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
        let mut position = 0;
        while position < len {
            let end = (position + PART_BYTES as u64).min(len);
            tokio::time::sleep(owed(end - position)).await;
            let bytes = match read_at(file, position..end).await {
                Ok(bytes) => bytes,
                Err(error) => {
                    writer.abort().await.ok();
                    return Err(error);
                }
            };
            if let Err(error) = writer.wait_for_capacity(PARTS_IN_FLIGHT).await {
                writer.abort().await.ok();
                return Err(error);
            }
            writer.put(bytes);
            position = end;
        }
        writer.finish().await.map(|_| ())
    }

    pub async fn get(&self, key: &str) -> StoreResult<Bytes> {
        self.store.get(&Path::from(key)).await?.bytes().await
    }

    pub async fn get_range(&self, key: &str, range: Range<u64>) -> StoreResult<Bytes> {
        self.store.get_range(&Path::from(key), range).await
    }

    /// The objects under `dir` (a `/`-separated prefix).
    pub async fn list(&self, dir: &str) -> StoreResult<Vec<Listed>> {
        let mut listing = self.store.list(Some(&Path::from(dir)));
        let mut keys = Vec::new();
        while let Some(meta) = listing.next().await {
            let meta = meta?;
            keys.push(Listed {
                key: meta.location.to_string(),
                size: meta.size,
                modified_ms: meta.last_modified.timestamp_millis(),
            });
        }
        Ok(keys)
    }

    /// Deletes `key`; a key already gone is no error (deletion is retried after crashes).
    pub async fn delete(&self, key: &str) -> StoreResult<()> {
        match self.store.delete(&Path::from(key)).await {
            Err(object_store::Error::NotFound { .. }) => Ok(()),
            other => other,
        }
    }
}

/// An object a listing found.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Listed {
    pub key: String,
    pub size: u64,
    /// When it was last written (ms since the epoch).
    pub modified_ms: i64,
}

/// One of a segment's open files.
#[derive(Debug, Clone)]
pub struct LocalFile {
    pub files: Arc<SegmentFiles>,
    pub pick: fn(&SegmentFiles) -> &std::fs::File,
}

/// `range` of `file`, read on a blocking thread.
async fn read_at(file: &LocalFile, range: Range<u64>) -> StoreResult<Bytes> {
    let file = file.clone();
    let read = tokio::task::spawn_blocking(move || {
        // Read into the vector's spare capacity: a zeroed 8 MiB buffer cost a memset (or
        // fresh pages) per part, 9% of the broker's CPU while copying.
        let len = (range.end - range.start) as usize;
        let mut bytes = Vec::with_capacity(len);
        let fd = (file.pick)(&file.files);
        while bytes.len() < len {
            let at = range.start + bytes.len() as u64;
            let read = rustix::io::pread(fd, rustix::buffer::spare_capacity(&mut bytes), at)
                .map_err(std::io::Error::from)?;
            if read == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
            }
        }
        Ok(Bytes::from(bytes))
    })
    .await
    .map_err(|e| std::io::Error::other(e.to_string()));
    read.and_then(|r| r)
        .map_err(|source| object_store::Error::Generic {
            store: "local segment",
            source: Box::new(source),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scheme_builds_its_client_without_touching_the_network() {
        // Building an S3 client needs a TLS provider for its HTTP client: it panicked
        // without one before the store installed ring's.
        let s3 = RemoteStore::open("s3://bucket/some/prefix").unwrap();
        assert_eq!(s3.url(), "s3://bucket/some/prefix");
        let dir = tempfile::tempdir().unwrap();
        let local = format!("file://{}/store", dir.path().display());
        assert!(RemoteStore::open(&local).is_ok());
        assert!(dir.path().join("store").is_dir(), "the directory is made");
        assert!(RemoteStore::open("memory://").is_ok());
        let unknown = RemoteStore::open("ftp://host/dir").unwrap_err();
        assert!(unknown.contains("unknown scheme ftp"), "{unknown}");
        assert!(RemoteStore::open("bucket")
            .unwrap_err()
            .contains("not a URL"));
    }

    #[tokio::test]
    async fn objects_are_put_read_by_range_listed_and_deleted() {
        let store = RemoteStore::open("memory://").unwrap();
        store
            .put("t-1/0/a.json", Bytes::from_static(b"{}"))
            .await
            .unwrap();
        store
            .put("t-1/0/a.log", Bytes::from(vec![7u8; 100]))
            .await
            .unwrap();
        store
            .put("t-1/1/b.log", Bytes::from(vec![1u8; 10]))
            .await
            .unwrap();
        let mut listed: Vec<(String, u64)> = store
            .list("t-1/0")
            .await
            .unwrap()
            .into_iter()
            .map(|l| (l.key, l.size))
            .collect();
        listed.sort();
        assert_eq!(
            listed,
            vec![
                ("t-1/0/a.json".to_string(), 2),
                ("t-1/0/a.log".to_string(), 100)
            ]
        );
        assert_eq!(
            store.get_range("t-1/0/a.log", 10..20).await.unwrap().len(),
            10
        );
        store.delete("t-1/0/a.log").await.unwrap();
        store.delete("t-1/0/a.log").await.unwrap(); // gone already: no error
        assert_eq!(store.list("t-1/0").await.unwrap().len(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_large_file_goes_up_in_parts_and_comes_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let open = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            std::fs::File::open(path).unwrap()
        };
        let data: Vec<u8> = (0..PART_BYTES * 2 + 12_345)
            .map(|i| (i % 251) as u8)
            .collect();
        let files = Arc::new(SegmentFiles {
            log: open("0.log", &data),
            offset_index: open("0.index", b""),
            time_index: open("0.timeindex", b""),
        });
        let store = RemoteStore::open("memory://").unwrap();
        let file = LocalFile {
            files,
            pick: |f| &f.log,
        };
        // Only the first `len` bytes go (a preallocated file is longer than its data).
        let len = data.len() as u64 - 45;
        let unthrottled = Mutex::new(Throttle::new(None));
        store
            .put_file("p/0.log", &file, len, &unthrottled)
            .await
            .unwrap();
        let back = store.get("p/0.log").await.unwrap();
        assert_eq!(back.len() as u64, len);
        assert!(back[..] == data[..len as usize]);
    }
}
