//! NumPy `.npz` files as `numpy.savez` writes them (a zip of stored, uncompressed `.npy`
//! arrays), and DLIO-style records built from them: `x.npy` (the sample) and `y.npy` (a
//! label), so numpy and DLIO can open what the benchmark and `generate_npz_bytes` write.

use std::io::{Cursor, Write};
use zip::write::SimpleFileOptions;

/// One array of an `.npz`: its name (without `.npy`), numpy dtype (`"<f4"`, `"|u1"`, ...),
/// shape, and its content in C order, already encoded as `descr` says.
#[derive(Debug, Clone, Copy)]
pub struct Array<'a> {
    /// The array's name in the archive, without `.npy`.
    pub name: &'a str,
    /// Its numpy dtype string (`"<f4"`, `"|u1"`, ...).
    pub descr: &'a str,
    /// Its shape.
    pub shape: &'a [usize],
    /// Its content in C order, encoded as `descr` says.
    pub data: &'a [u8],
}

/// The `.npz` holding `arrays`, in that order.
pub fn write(arrays: &[Array<'_>]) -> Vec<u8> {
    let size: usize = arrays.iter().map(|a| a.data.len() + 256).sum();
    let large = arrays.iter().any(|a| a.data.len() > u32::MAX as usize / 2);
    let mut buf = Cursor::new(Vec::with_capacity(size + 1024));
    {
        let mut z = zip::ZipWriter::new(&mut buf);
        let opts = SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .large_file(large);
        for a in arrays {
            z.start_file(format!("{}.npy", a.name), opts)
                .expect("in-memory zip");
            z.write_all(&npy_header(a.descr, a.shape))
                .expect("in-memory zip");
            z.write_all(a.data).expect("in-memory zip");
        }
        z.finish().expect("in-memory zip");
    }
    buf.into_inner()
}

/// The header of an `.npy` file (format 1.0) for an array of `shape` with dtype `descr`.
fn npy_header(descr: &str, shape: &[usize]) -> Vec<u8> {
    let shape = match shape {
        [n] => format!("({n},)"),
        dims => format!(
            "({})",
            dims.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Magic (6) + version (2) + header length (2) + dict, padded with spaces to a multiple of
    // 64 and ended by a newline (NPY format 1.0).
    let unpadded = 10 + dict.len() + 1;
    let pad = unpadded.div_ceil(64) * 64 - unpadded;
    let header_len = (dict.len() + pad + 1) as u16;
    let mut out = Vec::with_capacity(unpadded + pad);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&header_len.to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.extend(std::iter::repeat_n(b' ', pad));
    out.push(b'\n');
    out
}

/// An `.npz` of `size` bytes (give or take a byte at a digit boundary) whose `x` content is
/// deterministic in `key`.
pub fn record(key: &str, size: usize) -> Vec<u8> {
    // The framing (zip and npy headers) depends only on how many digits the sample length
    // has, so measure it on a cheap record with the same digit count and size the sample to
    // make the whole object `size` bytes, as DLIO sizes its records.
    let guess = size.saturating_sub(512).max(1);
    let probe = 10usize.pow(guess.to_string().len() as u32 - 1);
    let framing = build(key, probe).len() - probe;
    build(key, size.saturating_sub(framing).max(1))
}

fn build(key: &str, payload: usize) -> Vec<u8> {
    let mut x = vec![0; payload];
    crate::pattern::fill(key, 0, &mut x);
    write(&[
        Array {
            name: "x",
            descr: "|u1",
            shape: &[payload],
            data: &x,
        },
        Array {
            name: "y",
            descr: "<i8",
            shape: &[1],
            data: &0i64.to_le_bytes(),
        },
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_header_is_aligned_and_parsable() {
        let h = npy_header("|u1", &[1000]);
        assert_eq!(h.len() % 64, 0);
        assert!(h.starts_with(b"\x93NUMPY\x01\x00"));
        assert_eq!(*h.last().unwrap(), b'\n');
        let text = std::str::from_utf8(&h[10..]).unwrap();
        assert!(text.contains("'shape': (1000,)"), "{text}");
    }

    #[test]
    fn record_is_a_zip_of_two_arrays_near_the_size() {
        let r = record("train/img_1_of_2.npz", 100_000);
        assert_eq!(r.len(), 100_000);
        assert_eq!(record("k", 146_600_628).len(), 146_600_628);
        let mut z = zip::ZipArchive::new(Cursor::new(&r)).unwrap();
        let names: Vec<String> = (0..z.len())
            .map(|i| z.by_index(i).unwrap().name().unwrap().to_string())
            .collect();
        assert_eq!(names, vec!["x.npy", "y.npy"]);
        assert_eq!(
            z.by_name("x.npy").unwrap().compression(),
            zip::CompressionMethod::Stored
        );
    }
}
