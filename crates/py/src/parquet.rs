//! Parquet over object storage: a file's footer read with ranged GETs (cached per process),
//! the chunks of the selected columns of the selected row groups fetched by `get_ranges`
//! (only their bytes, give or take a tenth) and decoded to an Arrow IPC stream
//! (`sluice.parquet`, and s3dlio's `parquet_get_rg` that DLIO's dlrm workload calls), and a
//! parquet file of random float columns written row group by row group through a streaming
//! upload (memory: about one row group, whatever the file's size).

use crate::client::{Client, default_client, parse_uri};
use crate::errors::value_error;
use crate::object::Object;
use crate::runtime::block;
use arrow_array::{ArrayRef, FixedSizeListArray, Float32Array, RecordBatch, RecordBatchReader};
use arrow_schema::{DataType, Field, Schema};
use bytes::Bytes;
use futures::future::BoxFuture;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::async_writer::{AsyncArrowWriter, AsyncFileWriter};
use parquet::basic::Compression;
use parquet::errors::ParquetError;
use parquet::file::FOOTER_SIZE;
use parquet::file::metadata::{FooterTail, ParquetMetaData, ParquetMetaDataReader};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::reader::{ChunkReader, Length};
use pyo3::prelude::*;
use sluice_core::{
    ByteRange, Error, GetOptions, ObjectStore, ObjectStoreExt, ObjectUri, ObjectWriter,
    RangesOptions, Result, WriteOptions, gap_within,
};
use sluice_testdata::pattern;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

/// A file's size, version and metadata.
#[derive(Clone)]
struct Footer {
    size: u64,
    /// The version the metadata describes: its chunks are read of this version only.
    etag: Option<String>,
    md: Arc<ParquetMetaData>,
}

/// The bytes a projection may read beyond the chunks it selects, as a share of theirs: gaps
/// between chunks are read through (one request instead of two) only within it.
const PROJECTION_WASTE: f64 = 0.10;

/// Footers read in this process, by URI (s3dlio caches them the same way).
static FOOTERS: LazyLock<Mutex<HashMap<String, Footer>>> = LazyLock::new(Default::default);

fn footers() -> std::sync::MutexGuard<'static, HashMap<String, Footer>> {
    FOOTERS.lock().unwrap_or_else(|p| p.into_inner())
}

fn not_parquet(uri: &ObjectUri, what: impl std::fmt::Display) -> Error {
    Error::integrity(
        uri.to_string(),
        format!("not a readable parquet file: {what}"),
    )
}

/// The file's size and metadata: one ranged GET of the last `cap` bytes, a second only when
/// the metadata is larger than that.
async fn footer(store: &dyn ObjectStore, uri: &ObjectUri, cap: u64) -> Result<Footer> {
    if let Some(f) = footers().get(&uri.to_string()) {
        return Ok(f.clone());
    }
    let head = store.head(uri).await?;
    let (size, etag) = (head.size, head.etag);
    let footer = FOOTER_SIZE as u64;
    if size < footer + 4 {
        return Err(not_parquet(uri, format!("{size} bytes is too short")));
    }
    let tail_len = cap.clamp(footer, size);
    let pinned = |range| GetOptions {
        range: Some(range),
        if_match: etag.clone(),
    };
    let tail = store
        .get_with(uri, &pinned(ByteRange::new(size - tail_len, size)?))
        .await?;
    // Every length below is taken from the end of what arrived: a short reply must not
    // make one of them underflow.
    if tail.len() as u64 != tail_len {
        return Err(Error::integrity(
            uri.to_string(),
            format!(
                "asked for the last {tail_len} bytes of the file, got {}",
                tail.len()
            ),
        ));
    }
    let end: [u8; FOOTER_SIZE] = tail[tail.len() - FOOTER_SIZE..]
        .try_into()
        .map_err(|_| not_parquet(uri, "short footer"))?;
    let ft = FooterTail::try_new(&end).map_err(|e| not_parquet(uri, e))?;
    let needed = ft.metadata_length() as u64 + footer;
    if needed > size {
        return Err(not_parquet(
            uri,
            format!("metadata of {needed} bytes in a {size}-byte file"),
        ));
    }
    let meta: Bytes = if needed <= tail_len {
        tail.slice(tail.len() - needed as usize..tail.len() - FOOTER_SIZE)
    } else {
        store
            .get_with(uri, &pinned(ByteRange::new(size - needed, size - footer)?))
            .await?
    };
    let md =
        Arc::new(ParquetMetaDataReader::decode_metadata(&meta).map_err(|e| not_parquet(uri, e))?);
    let f = Footer { size, etag, md };
    footers().insert(uri.to_string(), f.clone());
    Ok(f)
}

/// The store and upload options of `client`, or of the default client.
fn store_of(
    py: Python<'_>,
    client: Option<&Client>,
) -> PyResult<(Arc<dyn ObjectStore>, WriteOptions)> {
    match client {
        Some(c) => Ok((c.store()?, c.write_options())),
        None => {
            let c = default_client(py)?;
            Ok((c.get().store()?, c.get().write_options()))
        }
    }
}

/// A column asked for by its leaf index or by its name (its dotted path: `a.b` for a field
/// of a struct).
#[derive(FromPyObject)]
pub enum Column {
    Index(usize),
    Name(String),
}

/// The leaf columns to read: `cols`, checked against the file, or all of them.
fn columns(uri: &ObjectUri, md: &ParquetMetaData, cols: Option<Vec<Column>>) -> Result<Vec<usize>> {
    let schema = md.file_metadata().schema_descr();
    let n = schema.num_columns();
    let Some(cols) = cols else {
        return Ok((0..n).collect());
    };
    cols.into_iter()
        .map(|c| match c {
            Column::Index(i) if i < n => Ok(i),
            Column::Index(i) => Err(Error::config(
                "columns",
                format!("column {i} does not exist in {uri} ({n} columns)"),
            )),
            Column::Name(name) => (0..n)
                .find(|&i| schema.column(i).path().string() == name)
                .ok_or_else(|| {
                    Error::config(
                        "columns",
                        format!("no column named {name:?} in {uri} ({n} columns)"),
                    )
                }),
        })
        .collect()
}

/// The row groups to read: `rgs`, checked against the file, or all of them.
fn row_groups(
    uri: &ObjectUri,
    md: &ParquetMetaData,
    rgs: Option<Vec<usize>>,
) -> Result<Vec<usize>> {
    let n = md.num_row_groups();
    match rgs {
        None => Ok((0..n).collect()),
        Some(r) => match r.iter().find(|&&i| i >= n) {
            Some(bad) => Err(Error::config(
                "row_groups",
                format!("{bad} out of range for '{uri}' ({n} row groups)"),
            )),
            None => Ok(r),
        },
    }
}

/// The bytes `start..end` of a file that hold the column chunks of one row group.
fn extent(md: &ParquetMetaData, rg: usize, cols: &[usize]) -> (u64, u64) {
    let group = md.row_group(rg);
    cols.iter()
        .map(|&c| {
            let (start, len) = group.column(c).byte_range();
            (start, start + len)
        })
        .fold((u64::MAX, 0), |(s, e), (cs, ce)| (s.min(cs), e.max(ce)))
}

/// One row group: its rows, and (offset, length) of each leaf column chunk.
type RowGroupLayout = (i64, Vec<(u64, u64)>);

/// Every row group of the file: (rows, [(offset, length) of each leaf column chunk]).
#[pyfunction]
#[pyo3(signature = (uri, footer_cap=4194304, client=None))]
pub fn parquet_row_groups(
    py: Python<'_>,
    uri: &str,
    footer_cap: u64,
    client: Option<&Client>,
) -> PyResult<Vec<RowGroupLayout>> {
    let (store, _) = store_of(py, client)?;
    let u = parse_uri(uri)?;
    let f = block(
        py,
        async move { footer(store.as_ref(), &u, footer_cap).await },
    )?;
    Ok(f.md
        .row_groups()
        .iter()
        .map(|g| {
            (
                g.num_rows(),
                g.columns().iter().map(|c| c.byte_range()).collect(),
            )
        })
        .collect())
}

/// The chunks of `cols` in row groups `rgs`, of the footer's version, fetched together:
/// ranges merged over gaps of at most `coalesce` bytes, by default only over gaps within
/// `PROJECTION_WASTE` of the chunks' bytes.
async fn fetch_chunks(
    store: &dyn ObjectStore,
    uri: &ObjectUri,
    f: &Footer,
    (rgs, cols): (&[usize], &[usize]),
    coalesce: Option<u64>,
) -> Result<Chunks> {
    let ranges: Vec<std::ops::Range<u64>> = rgs
        .iter()
        .flat_map(|&rg| {
            let group = f.md.row_group(rg);
            cols.iter().map(move |&c| {
                let (start, len) = group.column(c).byte_range();
                start..start + len
            })
        })
        .collect();
    let opts = RangesOptions {
        coalesce: coalesce.unwrap_or_else(|| gap_within(&ranges, PROJECTION_WASTE)),
        if_match: f.etag.clone(),
        ..RangesOptions::default()
    };
    let data = store.get_ranges_with(uri, &ranges, &opts).await?;
    let mut pieces: Vec<(u64, Bytes)> = ranges.iter().map(|r| r.start).zip(data).collect();
    pieces.sort_unstable_by_key(|p| p.0);
    Ok(Chunks {
        pieces,
        file_len: f.size,
    })
}

/// Row groups `rgs` of the file, restricted to `cols`, as one Arrow IPC stream (batches of
/// up to the largest group's rows, which may straddle groups; columns in the file's order),
/// decoded off the runtime's threads.
async fn read_ipc(
    store: &dyn ObjectStore,
    uri: &ObjectUri,
    footer_cap: u64,
    rgs: Option<Vec<usize>>,
    cols: Option<Vec<Column>>,
    coalesce: Option<u64>,
) -> Result<Bytes> {
    let f = footer(store, uri, footer_cap).await?;
    let rgs = row_groups(uri, &f.md, rgs)?;
    let cols = columns(uri, &f.md, cols)?;
    let chunks = fetch_chunks(store, uri, &f, (&rgs, &cols), coalesce).await?;
    let md = f.md.clone();
    tokio::task::spawn_blocking(move || to_arrow_ipc(chunks, md, rgs, cols))
        .await
        .map_err(|e| Error::integrity(uri.to_string(), format!("decode task failed: {e}")))?
        .map_err(|e| not_parquet(uri, e))
}

/// Row groups `row_groups` (all when None) of the file, restricted to the leaf `columns`
/// (indices or names; all when None), as an Arrow IPC stream: only the selected chunks are
/// fetched, in parallel ranged GETs, merged over gaps of at most `coalesce` bytes (None:
/// only where the bytes read through stay within a tenth of the chunks').
#[pyfunction]
#[pyo3(signature = (uri, row_groups=None, columns=None, coalesce=None, footer_cap=4194304, client=None))]
pub fn parquet_read(
    py: Python<'_>,
    uri: &str,
    row_groups: Option<Vec<usize>>,
    columns: Option<Vec<Column>>,
    coalesce: Option<u64>,
    footer_cap: u64,
    client: Option<&Client>,
) -> PyResult<Object> {
    let (store, _) = store_of(py, client)?;
    let u = parse_uri(uri)?;
    let data = block(py, async move {
        read_ipc(
            store.as_ref(),
            &u,
            footer_cap,
            row_groups,
            columns,
            coalesce,
        )
        .await
    })?;
    Ok(Object::new(uri.to_owned(), data))
}

/// Row group `rg_idx` of the file, restricted to the leaf columns `col_indices` (all when
/// None): decoded and re-encoded as an Arrow IPC stream with `decode="arrow"` (only the
/// selected chunks fetched), else the raw bytes from its first selected chunk to its last
/// (s3dlio's raw read: one ranged GET).
#[pyfunction]
#[pyo3(signature = (uri, rg_idx, col_indices=None, footer_cap=4194304, decode="arrow", client=None))]
pub fn parquet_get_rg(
    py: Python<'_>,
    uri: &str,
    rg_idx: usize,
    col_indices: Option<Vec<usize>>,
    footer_cap: u64,
    decode: &str,
    client: Option<&Client>,
) -> PyResult<Object> {
    let (store, _) = store_of(py, client)?;
    let u = parse_uri(uri)?;
    let cols = col_indices.map(|c| c.into_iter().map(Column::Index).collect());
    let data = if decode.eq_ignore_ascii_case("arrow") {
        block(py, async move {
            read_ipc(
                store.as_ref(),
                &u,
                footer_cap,
                Some(vec![rg_idx]),
                cols,
                None,
            )
            .await
        })?
    } else {
        block(py, async move {
            let f = footer(store.as_ref(), &u, footer_cap).await?;
            row_groups(&u, &f.md, Some(vec![rg_idx]))?;
            let cols = columns(&u, &f.md, cols)?;
            let (start, end) = extent(&f.md, rg_idx, &cols);
            if start >= end {
                return Ok(Bytes::new());
            }
            let opts = GetOptions {
                range: Some(ByteRange::new(start, end)?),
                if_match: f.etag.clone(),
            };
            store.get_with(&u, &opts).await
        })?
    };
    Ok(Object::new(uri.to_owned(), data))
}

/// The fetched column chunks of a file, seen by the parquet reader as the whole file: each
/// read it makes must lie within one chunk.
struct Chunks {
    /// (offset in the file, bytes), by offset.
    pieces: Vec<(u64, Bytes)>,
    file_len: u64,
}

impl Length for Chunks {
    fn len(&self) -> u64 {
        self.file_len
    }
}

impl ChunkReader for Chunks {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        let (at, data) = self.piece(start)?;
        Ok(bytes::Buf::reader(data.slice((start - at) as usize..)))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let (at, data) = self.piece(start)?;
        let from = (start - at) as usize;
        match from.checked_add(length) {
            Some(to) if to <= data.len() => Ok(data.slice(from..to)),
            _ => Err(outside(start, length as u64)),
        }
    }
}

impl Chunks {
    /// The chunk that holds byte `start`.
    fn piece(&self, start: u64) -> parquet::errors::Result<(u64, &Bytes)> {
        let i = self.pieces.partition_point(|(at, _)| *at <= start);
        match i.checked_sub(1).map(|i| &self.pieces[i]) {
            Some((at, data)) if start < at + data.len() as u64 => Ok((*at, data)),
            _ => Err(outside(start, 1)),
        }
    }
}

fn outside(start: u64, len: u64) -> ParquetError {
    ParquetError::General(format!(
        "bytes {start}..{} lie outside the fetched column chunks",
        start + len
    ))
}

fn to_arrow_ipc(
    reader: Chunks,
    md: Arc<ParquetMetaData>,
    rgs: Vec<usize>,
    cols: Vec<usize>,
) -> std::result::Result<Bytes, Box<dyn std::error::Error + Send + Sync>> {
    let rows = rgs
        .iter()
        .map(|&rg| usize::try_from(md.row_group(rg).num_rows()).unwrap_or(0))
        .max()
        .unwrap_or(0)
        .max(1);
    let mask = ProjectionMask::leaves(md.file_metadata().schema_descr(), cols);
    let meta = ArrowReaderMetadata::try_new(md, ArrowReaderOptions::new())?;
    let batches = ParquetRecordBatchReaderBuilder::new_with_metadata(reader, meta)
        .with_row_groups(rgs)
        .with_projection(mask)
        .with_batch_size(rows)
        .build()?;
    let schema = batches.schema();
    let mut out = Vec::new();
    let mut w = arrow_ipc::writer::StreamWriter::try_new(&mut out, &schema)?;
    for b in batches {
        w.write(&b?)?;
    }
    w.finish()?;
    drop(w);
    Ok(Bytes::from(out))
}

/// Forgets the cached footer of `uri` (after the file was rewritten).
#[pyfunction]
pub fn parquet_cache_invalidate(uri: &str) {
    footers().remove(uri);
}

#[pyfunction]
pub fn parquet_cache_clear() {
    footers().clear();
}

#[pyfunction]
pub fn parquet_cache_len() -> usize {
    footers().len()
}

/// Our streaming upload as the parquet writer's sink.
struct Sink(Box<dyn ObjectWriter>);

impl AsyncFileWriter for Sink {
    fn write(&mut self, bs: Bytes) -> BoxFuture<'_, parquet::errors::Result<()>> {
        Box::pin(async move {
            self.0
                .write(bs)
                .await
                .map_err(|e| ParquetError::External(Box::new(e)))
        })
    }

    fn complete(&mut self) -> BoxFuture<'_, parquet::errors::Result<()>> {
        Box::pin(async move {
            self.0
                .finish()
                .await
                .map(drop)
                .map_err(|e| ParquetError::External(Box::new(e)))
        })
    }
}

/// A parquet file of float32 columns (`(name, 1)`: a scalar; `(name, n)`: a fixed-size list
/// of n), `rows_per_rg` rows in each of `num_row_groups` row groups of incompressible
/// values, uncompressed and without statistics or dictionaries (as s3dlio writes them),
/// uploaded one row group at a time.
#[pyfunction]
#[pyo3(signature = (uri, columns, rows_per_rg, num_row_groups, client=None))]
pub fn parquet_write_random(
    py: Python<'_>,
    uri: &str,
    columns: Vec<(String, usize)>,
    rows_per_rg: usize,
    num_row_groups: usize,
    client: Option<&Client>,
) -> PyResult<()> {
    if columns.is_empty() || columns.iter().any(|(_, n)| *n == 0) {
        return Err(value_error(
            "columns",
            "need at least one column, each of width 1 or more",
        ));
    }
    if rows_per_rg == 0 {
        return Err(value_error("rows_per_rg", "must be at least 1"));
    }
    let (store, mut opts) = store_of(py, client)?;
    let u = parse_uri(uri)?;
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, n)| match n {
            1 => Field::new(name, DataType::Float32, false),
            n => Field::new(
                name,
                DataType::FixedSizeList(
                    Arc::new(Field::new("element", DataType::Float32, false)),
                    *n as i32,
                ),
                false,
            ),
        })
        .collect();
    let schema = Arc::new(Schema::new(fields));
    block(py, async move {
        let fail =
            |e: ParquetError| Error::integrity(u.to_string(), format!("writing parquet: {e}"));
        // Two parts in flight: about one row group in memory, as s3dlio's streaming writer.
        opts.set_max_in_flight(2);
        let sink = Sink(store.writer(&u, opts).await?);
        let props = WriterProperties::builder()
            .set_compression(Compression::UNCOMPRESSED)
            .set_statistics_enabled(EnabledStatistics::None)
            .set_dictionary_enabled(false)
            .set_max_row_group_row_count(Some(rows_per_rg))
            .build();
        let mut w = AsyncArrowWriter::try_new(sink, schema.clone(), Some(props)).map_err(fail)?;
        for rg in 0..num_row_groups {
            let arrays: Vec<ArrayRef> = columns
                .iter()
                .zip(schema.fields())
                .map(|((name, n), field)| {
                    random_column(&format!("{u}/{rg}/{name}"), rows_per_rg, *n, field)
                })
                .collect::<Result<_>>()?;
            let batch = RecordBatch::try_new(schema.clone(), arrays)
                .map_err(|e| Error::integrity(u.to_string(), e.to_string()))?;
            w.write(&batch).await.map_err(fail)?;
            w.flush().await.map_err(fail)?;
        }
        w.close().await.map_err(fail)?;
        Ok(())
    })
}

fn random_column(key: &str, rows: usize, width: usize, field: &Field) -> Result<ArrayRef> {
    let mut raw = vec![0u8; rows * width * 4];
    pattern::fill(key, 0, &mut raw);
    let values: Vec<f32> = raw
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let values = Float32Array::from(values);
    Ok(match field.data_type() {
        DataType::FixedSizeList(child, n) => Arc::new(
            FixedSizeListArray::try_new(child.clone(), *n, Arc::new(values), None)
                .map_err(|e| Error::integrity(key, e.to_string()))?,
        ),
        _ => Arc::new(values),
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parquet_row_groups, m)?)?;
    m.add_function(wrap_pyfunction!(parquet_get_rg, m)?)?;
    m.add_function(wrap_pyfunction!(parquet_read, m)?)?;
    m.add_function(wrap_pyfunction!(parquet_cache_invalidate, m)?)?;
    m.add_function(wrap_pyfunction!(parquet_cache_clear, m)?)?;
    m.add_function(wrap_pyfunction!(parquet_cache_len, m)?)?;
    m.add_function(wrap_pyfunction!(parquet_write_random, m)?)?;
    Ok(())
}
