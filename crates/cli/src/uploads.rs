//! `sluice rm --incomplete-uploads s3://bucket/prefix/ [--older-than 1d]`: the multipart
//! uploads a writer left when it was killed mid-upload (a checkpoint save under SIGKILL, an
//! OOM-killed rank). Their parts are stored and billed but no object is visible, and S3
//! keeps them until a lifecycle rule or this aborts them.

use crate::objects::RmArgs;
use futures::{StreamExt, TryStreamExt};
use sluice_console::output::Failure;
use sluice_core::ObjectStore;
use sluice_core::ObjectStoreExt;
use sluice_core::listing::Upload;
use std::time::{Duration, SystemTime};

/// Lists the uploads under each URI (paged), keeps those begun at least `--older-than` ago,
/// and aborts them `--jobs` at a time; one line (or JSON object) per upload.
pub async fn abort_incomplete(a: RmArgs) -> Result<(), Failure> {
    if a.jobs == 0 {
        return Err(Failure::Usage("--jobs: must be at least 1".into()));
    }
    let uris: Vec<&str> = a.uris.iter().map(String::as_str).collect();
    let store = a.store.open_for(&uris).await?;
    let store: &dyn ObjectStore = store.as_ref();
    let a = &a;
    let now = SystemTime::now();
    let mut targets = Vec::new();
    for s in &a.uris {
        let prefix = sluice_core::ObjectUri::parse(s)?;
        let mut listed = store.list_uploads(&prefix);
        while let Some(upload) = listed.try_next().await? {
            match age(&upload, now) {
                Some(age) if a.older_than.is_none_or(|min| age >= min) => targets.push(upload),
                // The store did not say when it began: only an unbounded sweep takes it.
                None if a.older_than.is_none() => targets.push(upload),
                _ => {}
            }
        }
    }
    let count = targets.len();
    let failed: usize = futures::stream::iter(&targets)
        .map(|upload| async move {
            let outcome = if a.dry_run {
                Ok(())
            } else {
                store.abort_upload(upload).await
            };
            let error = outcome.err().map(|e| e.to_string());
            report(upload, now, error.as_deref(), a);
            usize::from(error.is_some())
        })
        .buffer_unordered(a.jobs)
        .boxed() // Send checked here, where the borrows' lifetimes are known (rustc #102211)
        .fold(0, |n, f| std::future::ready(n + f))
        .await;
    if failed > 0 {
        return Err(Failure::Other(format!(
            "{failed} of {count} incomplete uploads not aborted"
        )));
    }
    Ok(())
}

fn age(upload: &Upload, now: SystemTime) -> Option<Duration> {
    // One begun "in the future" (clocks apart) is as young as can be.
    upload
        .initiated
        .map(|t| now.duration_since(t).unwrap_or_default())
}

fn report(upload: &Upload, now: SystemTime, error: Option<&str>, a: &RmArgs) {
    let status = match (error, a.dry_run) {
        (Some(_), _) => "failed",
        (None, true) => "would abort",
        (None, false) => "aborted",
    };
    let age = age(upload, now).map(|d| d.as_secs());
    if a.json {
        println!(
            "{}",
            serde_json::json!({"uri": upload.uri.to_string(), "upload_id": upload.upload_id,
                "age_s": age, "status": status, "error": error})
        );
    } else if let Some(e) = error {
        eprintln!("sluice: rm --incomplete-uploads {}: {e}", upload.uri);
    } else {
        let began = age.map_or_else(
            || "began at an unknown time".to_owned(),
            |s| {
                format!(
                    "began {} ago",
                    humantime::format_duration(Duration::from_secs(s))
                )
            },
        );
        println!(
            "{status} {} (upload {}, {began})",
            upload.uri, upload.upload_id
        );
    }
}
