//! A streamed write to a file: bytes go to a hidden temporary file as they come, and
//! `finish` renames it into place, so the object appears whole or not at all.

use crate::{create_temp, etag_of, publish, task_failed, temp_path};
use async_trait::async_trait;
use bytes::Bytes;
use sluice_core::WriterState;
use sluice_core::{Error, ObjectUri, ObjectWriter, Result, WriteInfo};
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug)]
pub struct FsWriter {
    uri: ObjectUri,
    path: PathBuf,
    tmp: PathBuf,
    /// Taken while a blocking write holds it.
    file: Option<File>,
    sync: bool,
    /// `finish` fails rather than replace an existing file (`PutMode::Create`).
    create_only: bool,
    written: u64,
    state: WriterState,
    /// A forked child drops its copy of the parent's writer: that must not delete the
    /// parent's temporary file.
    owner: u32,
}

impl FsWriter {
    pub fn create(uri: ObjectUri, path: PathBuf, sync: bool, create_only: bool) -> Result<Self> {
        let tmp = temp_path(&uri, &path)?;
        let file = create_temp(&uri, &tmp)?;
        Ok(Self {
            uri,
            path,
            tmp,
            file: Some(file),
            sync,
            create_only,
            written: 0,
            state: WriterState::Open,
            owner: std::process::id(),
        })
    }

    fn take_file(&mut self) -> Result<File> {
        self.state.check_open(&self.uri.to_string())?;
        self.file.take().ok_or_else(|| {
            Error::integrity(self.uri.to_string(), "an earlier write did not complete")
        })
    }

    fn discard(&mut self) {
        self.file = None;
        let _ = std::fs::remove_file(&self.tmp);
    }

    fn fail<T>(&mut self, e: Error) -> Result<T> {
        self.state = WriterState::Failed;
        self.discard();
        Err(e)
    }
}

#[async_trait]
impl ObjectWriter for FsWriter {
    async fn write(&mut self, data: Bytes) -> Result<()> {
        let mut file = self.take_file()?;
        let uri = self.uri.clone();
        let len = data.len() as u64;
        let result = tokio::task::spawn_blocking(move || {
            let r = file
                .write_all(&data)
                .map_err(|e| Error::io(uri.to_string(), "write", e));
            (file, r)
        })
        .await;
        match result {
            Ok((file, Ok(()))) => {
                self.file = Some(file);
                self.written += len;
                Ok(())
            }
            Ok((_, Err(e))) => self.fail(e),
            Err(e) => {
                let e = task_failed(&self.uri, e);
                self.fail(e)
            }
        }
    }

    async fn finish(&mut self) -> Result<WriteInfo> {
        let file = self.take_file()?;
        let (uri, tmp, path, sync, create_only) = (
            self.uri.clone(),
            self.tmp.clone(),
            self.path.clone(),
            self.sync,
            self.create_only,
        );
        let result = tokio::task::spawn_blocking(move || {
            publish(&uri, file, &tmp, &path, sync, create_only)
        })
        .await
        .map_err(|e| task_failed(&self.uri, e))
        .and_then(|r| r);
        match result {
            Ok(meta) => {
                self.state = WriterState::Finished;
                Ok(WriteInfo {
                    total_bytes: self.written,
                    parts: 1,
                    etag: Some(etag_of(&meta)),
                })
            }
            Err(e) => self.fail(e),
        }
    }

    async fn abort(&mut self) -> Result<()> {
        if self.state == WriterState::Open {
            self.state = WriterState::Aborted;
            self.discard();
        }
        Ok(())
    }

    fn bytes_written(&self) -> u64 {
        self.written
    }
}

impl Drop for FsWriter {
    fn drop(&mut self) {
        if self.state == WriterState::Open && self.owner == std::process::id() {
            self.discard();
        }
    }
}
