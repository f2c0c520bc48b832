//! `sluice bench`: the A/B benchmark. Reader shapes of the MLPerf Storage workload
//! (processes × prefetch, each worker a real process reading its shard in batches of 7),
//! for each backend, beside a `curl` reference reading the same objects.
//!
//! `args`: command lines; `server`: the embedded server and CPU pinning; `worker`: the
//! worker processes and their reports; `curl`: the reference row; `report`: the table and
//! JSON; `plot`: the SVG.

mod args;
mod curl;
mod plot;
mod report;
mod server;
mod worker;

pub use args::{BenchArgs, WorkerArgs};
pub use worker::worker;

use crate::output::Failure;
use args::parse_shape;
use server::{client_cpus, start_server, which};
use sluice_core::ObjectUri;
use sluice_loader::Dataset;
use sluice_testserver::{DEFAULT_ACCESS_KEY, DEFAULT_SECRET_KEY};
use std::io::Write;

pub async fn run(a: BenchArgs) -> Result<(), Failure> {
    let shapes: Vec<(usize, usize)> = a
        .shapes
        .iter()
        .map(|s| parse_shape(s))
        .collect::<Result<_, _>>()?;
    let backends: Vec<String> = if a.backends.is_empty() {
        sluice::registry::compiled()
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        a.backends.clone()
    };
    for b in &backends {
        if !sluice::registry::compiled().contains(&b.as_str()) {
            return Err(sluice_core::Error::config(
                "--backends",
                format!(
                    "backend {b:?} is not in this build; available: {}",
                    sluice::registry::compiled().join(", ")
                ),
            )
            .into());
        }
    }
    if a.pin && which("taskset").is_none() {
        return Err(Failure::Usage("--pin needs `taskset` (util-linux)".into()));
    }

    // The store: an embedded server with a generated dataset, or the one given.
    let (server, store_args, prefix) = match &a.uri {
        Some(u) => (None, a.store.clone(), ObjectUri::parse(u)?),
        None => {
            let server = start_server(a.pin)?;
            let mut s = a.store.clone();
            s.endpoint = Some(if a.https {
                server.https.clone()
            } else {
                server.http.clone()
            });
            s.ca_bundle = Some(server.ca.clone());
            // The embedded server is the one endpoint.
            s.endpoints.clear();
            (
                Some(server),
                s,
                ObjectUri::parse("s3://sluice-test/bench/")?,
            )
        }
    };
    // The embedded server takes its published test keys; a real store, the environment's.
    let keys = server.as_ref().map(|_| {
        (
            DEFAULT_ACCESS_KEY.to_string(),
            DEFAULT_SECRET_KEY.to_string(),
        )
    });
    let mut cfg = store_args.config().await?;
    if let Some((ak, sk)) = &keys {
        cfg.credentials = sluice_core::CredentialsCache::from_static(ak, sk, None);
    }
    let store = sluice::registry::open(store_args.backend.as_deref(), cfg.clone())?;
    if server.is_some() {
        eprintln!(
            "generating {} records of {} bytes under {prefix} ...",
            a.count, a.size
        );
        crate::objects::write_dataset(store.clone(), &prefix, a.count, a.size, 4, true).await?;
    }
    let dataset = Dataset::from_prefix(store.as_ref(), &prefix, None).await?;
    if dataset.is_empty() {
        return Err(sluice_core::Error::NotFound {
            uri: prefix.to_string(),
            code: "no objects to read".into(),
        }
        .into());
    }
    let total: u64 = dataset.items().iter().filter_map(|i| i.size).sum();
    let list = tempfile::NamedTempFile::new().map_err(|e| Failure::Other(e.to_string()))?;
    {
        let mut f = std::io::BufWriter::new(list.as_file());
        for i in dataset.items() {
            writeln!(f, "{}\t{}", i.uri, i.size.unwrap_or(0))
                .map_err(|e| Failure::Other(e.to_string()))?;
        }
    }
    let endpoint = store_args
        .endpoint
        .clone()
        .or_else(|| std::env::var("AWS_ENDPOINT_URL_S3").ok())
        .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())
        // Of several, curl reads from the first.
        .or_else(|| cfg.endpoints.first().map(|u| u.to_string()));
    let cpus = client_cpus(a.pin);

    let mut rows = Vec::new();
    if !a.no_curl {
        match endpoint.as_deref() {
            Some(ep) if which("curl").is_some() => rows.push(
                curl::curl_row(ep, &cfg, keys.as_ref(), &dataset, total, cpus.as_deref()).await?,
            ),
            _ => eprintln!("skipping the curl row: curl or an endpoint URL is missing"),
        }
    }
    for backend in &backends {
        for &(procs, prefetch) in &shapes {
            eprintln!("{backend}: {procs} process(es) x prefetch {prefetch} ...");
            rows.push(worker::worker_row(
                backend,
                procs,
                prefetch,
                a.epochs,
                a.pin_endpoints,
                &store_args,
                keys.as_ref(),
                list.path(),
                cpus.as_deref(),
            )?);
        }
    }
    drop(server);

    report::print_table(&rows);
    if let Some(p) = &a.json_out {
        let doc = serde_json::json!({"objects": dataset.len(), "bytes_per_pass": total, "pinned": a.pin, "https": a.https, "rows": rows});
        report::write_json(p, &doc)?;
    }
    if let Some(p) = &a.plot {
        plot::throughput(p, &rows)
            .map_err(|e| Failure::Other(format!("drawing {}: {e}", p.display())))?;
    }
    Ok(())
}
