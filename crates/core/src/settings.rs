//! Every setting sluice reads, defined once: the environment variables that set it (first
//! found wins), the CLI flag and the Python keyword that set it too, its default, the grammar
//! of its value and its doc line. `StoreConfig::from_env`, the loader, the facade, the CLI
//! and Python read their settings through these constants; `docs/configuration.md`'s table
//! is generated from [`ALL`] (a test fails when the two differ).
//!
//! A value that does not parse is an error naming the variable and an example of what it
//! takes, never a warning that quietly turns a feature off: [`check`] reads every setting
//! of the table, and every client's configuration is made through it.

use crate::error::{Error, Result};
use std::time::Duration;

/// One setting: where it is read from and what it takes. `T` is its parsed value.
#[derive(Debug)]
pub struct Setting<T: 'static> {
    /// What it is and where it is read from.
    pub info: Info,
    /// Its grammar; `Err` names the forms it takes, with an example.
    pub parse: fn(&str) -> std::result::Result<T, &'static str>,
}

impl<T> Setting<T> {
    /// The first of its variables set to more than blanks, with that variable's name.
    pub fn lookup(&self, get: &dyn Fn(&str) -> Option<String>) -> Option<(&'static str, String)> {
        self.info
            .env
            .iter()
            .find_map(|var| Some((*var, get(var).filter(|v| !v.trim().is_empty())?)))
    }

    /// Its value from `get` (`None`: unset). A value that does not parse is an error naming
    /// the variable that held it, the forms it takes and what it was.
    pub fn read(&self, get: &dyn Fn(&str) -> Option<String>) -> Result<Option<T>> {
        self.lookup(get)
            .map(|(var, v)| {
                (self.parse)(v.trim())
                    .map_err(|want| Error::config(var, format!("expected {want}, got {v:?}")))
            })
            .transpose()
    }

    /// Its value from the process environment.
    pub fn from_env(&self) -> Result<Option<T>> {
        self.read(&|k| std::env::var(k).ok())
    }
}

/// A setting of any value type, as the table lists it.
pub trait Described: Sync {
    /// What it is, where it is read from and its doc line.
    fn info(&self) -> &Info;
    /// Whether its value in `get`, if any, parses.
    fn check(&self, get: &dyn Fn(&str) -> Option<String>) -> Result<()>;
}

/// What a setting is and where it is read from: everything but its parser.
#[derive(Debug, Clone, Copy)]
pub struct Info {
    /// What the setting is, in a few words (the docs' first column).
    pub name: &'static str,
    /// The environment variables that set it, first found wins (none: an argument only).
    pub env: &'static [&'static str],
    /// The `sluice` flag that sets it for one command.
    pub flag: Option<&'static str>,
    /// The `sluice.Client` keyword that sets it for one client.
    pub python: Option<&'static str>,
    /// What holds when nothing sets it.
    pub default: &'static str,
    /// What it does, for the docs.
    pub doc: &'static str,
}

impl<T> Described for Setting<T> {
    fn info(&self) -> &Info {
        &self.info
    }

    fn check(&self, get: &dyn Fn(&str) -> Option<String>) -> Result<()> {
        self.read(get).map(drop)
    }
}

/// Checks every setting of the table in `get`: the first value that does not parse is the
/// error, naming its variable.
pub fn check(get: &dyn Fn(&str) -> Option<String>) -> Result<()> {
    ALL.iter().try_for_each(|s| s.check(get))
}

/// Every setting, in the order the docs list them.
pub static ALL: &[&dyn Described] = &[
    &BACKEND,
    &ENDPOINT,
    &ENDPOINTS,
    &PIN_ENDPOINT_BY_RANK,
    &REGION,
    &PROFILE,
    &CREDENTIALS,
    &UNSIGNED,
    &CA_BUNDLE,
    &MAX_ATTEMPTS,
    &CONNECT_TIMEOUT,
    &FIRST_BYTE_TIMEOUT,
    &STALL_TIMEOUT,
    &PATH_STYLE,
    &MULTIPART_THRESHOLD,
    &MULTIPART_PART_SIZE,
    &PARTS_IN_FLIGHT,
    &HTTP2,
    &MAX_CONNECTIONS,
    &DIRECT_GET,
    &UPLOAD_CHECKSUMS,
    &DOWNLOAD_CHECKSUMS,
    &THREADS,
    &LOG,
    &OP_LOG,
    &HUGEPAGES,
    &MALLOC_TRIM,
    &POPULATE,
    &SHM_POOL,
    &SHM_POOL_SIZE,
];

/// The client stack.
pub const BACKEND: Setting<String> = Setting {
    info: Info {
        name: "client stack",
        env: &["S3_BACKEND"],
        flag: Some("--backend"),
        python: Some("backend"),
        default: "hyper",
        doc: "`hyper`, `awssdk` or `objectstore`, among those compiled in (cargo features of the \
          same names)",
    },
    parse: text,
};

/// The endpoint.
pub const ENDPOINT: Setting<String> = Setting {
    info: Info {
        name: "endpoint",
        env: &["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"],
        flag: Some("--endpoint"),
        python: Some("endpoint"),
        default: "AWS (`https://s3.<region>.amazonaws.com`)",
        doc: "an `http://` or `https://` URL; a custom endpoint is addressed path-style",
    },
    parse: text,
};

/// Several endpoints of one store.
pub const ENDPOINTS: Setting<String> = Setting {
    info: Info {
        name: "several endpoints of one store",
        env: &["S3_ENDPOINT_URIS"],
        flag: Some("--endpoints"),
        python: Some("endpoints"),
        default: "one",
        doc: "comma-separated URLs (wins over the endpoint): each request goes to the endpoint \
          with the fewest in flight; one that does not answer is avoided (200 ms, doubling to \
          10 s, then one probe) and the retry goes to another. `sluice get` and `sluice bench` \
          print what each endpoint served; Python has `Client.endpoint_stats()`, \
          `sluice.endpoint_stats()` and `Loader.stats()[\"endpoints\"]`",
    },
    parse: text,
};

/// One endpoint per rank.
pub const PIN_ENDPOINT_BY_RANK: Setting<bool> = Setting {
    info: Info {
        name: "one endpoint per rank",
        env: &["SLUICE_PIN_ENDPOINT_BY_RANK"],
        flag: Some("--pin-endpoints"),
        python: None,
        default: "off (every rank spreads)",
        doc: "rank `RANK` (else `OMPI_COMM_WORLD_RANK`, `PMI_RANK`) uses endpoint `rank % n` of \
          the endpoints alone, as DLIO assigns them (`--pin-endpoints` is `sluice bench`'s)",
    },
    parse: switch,
};

/// The region.
pub const REGION: Setting<String> = Setting {
    info: Info {
        name: "region",
        env: &["AWS_REGION", "AWS_DEFAULT_REGION"],
        flag: Some("--region"),
        python: Some("region"),
        default: "the profile's `region`, else `us-east-1`",
        doc: "letters, digits and dashes (`us-east-1`, `garage`)",
    },
    parse: text,
};

/// The AWS profile.
pub const PROFILE: Setting<String> = Setting {
    info: Info {
        name: "profile",
        env: &["AWS_PROFILE"],
        flag: Some("--profile"),
        python: Some("profile"),
        default: "`default`",
        doc: "the profile of `~/.aws/credentials` / `~/.aws/config` (or `AWS_SHARED_CREDENTIALS_FILE` \
          / `AWS_CONFIG_FILE`); given as a flag or keyword it wins over keys in the environment, \
          as the AWS CLI's `--profile` does",
    },
    parse: text,
};

/// Static credentials.
pub const CREDENTIALS: Setting<String> = Setting {
    info: Info {
        name: "credentials",
        env: &["AWS_ACCESS_KEY_ID"],
        flag: None,
        python: None,
        default: "the profile, then web identity, ECS and instance metadata",
        doc: "with `AWS_SECRET_ACCESS_KEY` (and `AWS_SESSION_TOKEN`); one without the other is an \
          error. Secrets never appear in logs, errors or `Debug` output",
    },
    parse: text,
};

/// Unsigned requests.
pub const UNSIGNED: Setting<bool> = Setting {
    info: Info {
        name: "unsigned requests (public buckets)",
        env: &[],
        flag: Some("--no-sign-request"),
        python: Some("unsigned"),
        default: "signed",
        doc: "no credentials are looked up",
    },
    parse: switch,
};

/// Extra CA certificates.
pub const CA_BUNDLE: Setting<String> = Setting {
    info: Info {
        name: "extra CA certificates",
        env: &["AWS_CA_BUNDLE"],
        flag: Some("--ca-bundle"),
        python: Some("ca_bundle"),
        default: "system and Mozilla roots",
        doc: "a PEM file",
    },
    parse: text,
};

/// Attempts per request.
pub const MAX_ATTEMPTS: Setting<u32> = Setting {
    info: Info {
        name: "attempts per request",
        env: &["SLUICE_MAX_ATTEMPTS", "AWS_MAX_ATTEMPTS"],
        flag: None,
        python: Some("max_attempts"),
        default: "10",
        doc: "transient failures (throttles, 5xx, resets, timeouts) are retried with jittered \
          backoff up to this many attempts",
    },
    parse: attempts,
};

/// The connect timeout.
pub const CONNECT_TIMEOUT: Setting<Duration> = Setting {
    info: Info {
        name: "connect timeout",
        env: &["SLUICE_CONNECT_TIMEOUT"],
        flag: None,
        python: Some("connect_timeout"),
        default: "5 s",
        doc: "seconds (`2.5`) or with a unit (`500ms`)",
    },
    parse: seconds,
};

/// The first-byte timeout.
pub const FIRST_BYTE_TIMEOUT: Setting<Duration> = Setting {
    info: Info {
        name: "first-byte timeout",
        env: &["SLUICE_FIRST_BYTE_TIMEOUT"],
        flag: None,
        python: Some("first_byte_timeout"),
        default: "30 s",
        doc: "from a request sent to its answer's head",
    },
    parse: seconds,
};

/// The stall timeout.
pub const STALL_TIMEOUT: Setting<Duration> = Setting {
    info: Info {
        name: "stall timeout",
        env: &["SLUICE_STALL_TIMEOUT"],
        flag: None,
        python: Some("stall_timeout"),
        default: "20 s",
        doc: "a body that sends nothing for this long is cut and resumed",
    },
    parse: seconds,
};

/// Path-style addressing.
pub const PATH_STYLE: Setting<bool> = Setting {
    info: Info {
        name: "path-style addressing",
        env: &["SLUICE_PATH_STYLE"],
        flag: None,
        python: None,
        default: "path-style for custom endpoints",
        doc: "`1` or `0`",
    },
    parse: switch,
};

/// The multipart threshold.
pub const MULTIPART_THRESHOLD: Setting<u64> = Setting {
    info: Info {
        name: "multipart threshold",
        env: &["SLUICE_MULTIPART_THRESHOLD"],
        flag: None,
        python: None,
        default: "16 MiB",
        doc: "a PUT this large or larger is a multipart upload",
    },
    parse: size,
};

/// The multipart part size.
pub const MULTIPART_PART_SIZE: Setting<u64> = Setting {
    info: Info {
        name: "multipart part size",
        env: &["SLUICE_MULTIPART_PART_SIZE"],
        flag: None,
        python: None,
        default: "16 MiB",
        doc: "at least 5 MiB (S3's minimum); a writer's `part_size=` sets one writer's",
    },
    parse: size,
};

/// Parts in flight of the streaming uploads.
pub const PARTS_IN_FLIGHT: Setting<usize> = Setting {
    info: Info {
        name: "parts in flight of the streaming uploads",
        env: &["SLUICE_PARTS_IN_FLIGHT"],
        flag: None,
        python: None,
        default: "adaptive, 4 → 32 parts",
        doc: "unset: one window for all the uploads of a client (`sluice cp`, the writers, \
          `torch.save`, checkpoints), found while they upload: from 4, doubling while a \
          doubling raises the rate of answered parts by 15%, or halving where the first \
          doubling did not pay; within 512 MiB of parts per client. `N` fixes N per writer; \
          `writer(..., max_in_flight=N)` one writer's",
    },
    parse: positive,
};

/// HTTP/2.
pub const HTTP2: Setting<bool> = Setting {
    info: Info {
        name: "HTTP/2",
        env: &["SLUICE_HTTP2"],
        flag: None,
        python: None,
        default: "HTTP/1.1",
        doc: "`1`: hyper and objectstore offer h2 (awssdk's client always offers it by ALPN; S3 \
          itself serves HTTP/1.1 only)",
    },
    parse: switch,
};

/// Requests in flight per client.
pub const MAX_CONNECTIONS: Setting<usize> = Setting {
    info: Info {
        name: "requests in flight per client",
        env: &["SLUICE_MAX_CONNECTIONS"],
        flag: Some("--jobs"),
        python: None,
        default: "adaptive, 16 → 256",
        doc: "unset: found at run time, for reads, metadata and writes apart under this cap (a \
          fresh client whose job knows its objects starts from the requests they need at \
          once, within its memory), doubling while the store's rate follows, ×0.7 on a \
          throttle, timeout or reset (`Client.congestion()` shows it). `N` fixes it at N, cut \
          only while the store throttles; `sluice get -j N` for one command",
    },
    parse: positive,
};

/// GET bodies read in place.
pub const DIRECT_GET: Setting<bool> = Setting {
    info: Info {
        name: "GET bodies read in place (hyper)",
        env: &["SLUICE_DIRECT_GET"],
        flag: None,
        python: None,
        default: "on",
        doc: "`0` sends GETs through hyper, whose read buffer costs a second copy of every byte, \
          instead of reading each body from the socket straight into its buffer (HTTP/1.1 \
          only)",
    },
    parse: switch,
};

/// Upload checksums.
pub const UPLOAD_CHECKSUMS: Setting<bool> = Setting {
    info: Info {
        name: "upload checksums (hyper, awssdk)",
        env: &["AWS_REQUEST_CHECKSUM_CALCULATION"],
        flag: None,
        python: None,
        default: "`when_supported` (on)",
        doc: "`when_supported`: each PUT and part carries its CRC64NVME, CompleteMultipartUpload \
          the whole object's, and the store refuses bytes that do not match (object_store can \
          send none). A store too old to know CRC64NVME (Garage before 2.x, older MinIO or \
          Ceph) refuses a multipart upload that asks for it: set `when_required` there",
    },
    parse: when,
};

/// Download checksums.
pub const DOWNLOAD_CHECKSUMS: Setting<bool> = Setting {
    info: Info {
        name: "download checksums (hyper, awssdk)",
        env: &["AWS_RESPONSE_CHECKSUM_VALIDATION"],
        flag: None,
        python: None,
        default: "`when_required` (off; [benchmarks.md](benchmarks.md) says why)",
        doc: "`when_supported`: whole-object GETs ask for the store's CRC64NVME and check the bytes \
          against it (a mismatch is an `Integrity` error naming both values)",
    },
    parse: when,
};

/// Runtime threads.
pub const THREADS: Setting<usize> = Setting {
    info: Info {
        name: "runtime threads",
        env: &["SLUICE_THREADS"],
        flag: None,
        python: None,
        default: "CPUs available",
        doc: "the async runtime's worker threads; `0` or `auto`: one per CPU available",
    },
    parse: |s| match s.to_ascii_lowercase().as_str() {
        "0" | "auto" => Ok(0),
        n => n
            .parse()
            .map_err(|_| "a number of threads such as 8, or 0 or auto for one per CPU"),
    },
};

/// What is logged.
pub const LOG: Setting<String> = Setting {
    info: Info {
        name: "log",
        env: &["SLUICE_LOG", "RUST_LOG"],
        flag: Some("--log-level"),
        python: None,
        default: "warnings",
        doc: "a level (`info`, `debug`) or a filter (`sluice=debug,hyper=info`), on stderr; `-v` \
          and `-vv` are `info` and `debug`",
    },
    parse: text,
};

/// The op-log.
pub const OP_LOG: Setting<String> = Setting {
    info: Info {
        name: "op-log",
        env: &["SLUICE_OP_LOG"],
        flag: Some("--op-log"),
        python: None,
        default: "off",
        doc: "a file to write a line per request to, zstd-compressed TSV (`docs/oplog.md`); \
          `{pid}` in its name is the process id, and a process that finds the file there \
          writes `NAME.<pid>.EXT` beside it. `sluice bench --replay FILE` replays it",
    },
    parse: text,
};

/// Huge pages for fresh buffers.
pub const HUGEPAGES: Setting<bool> = Setting {
    info: Info {
        name: "huge pages for fresh buffers",
        env: &["SLUICE_HUGEPAGES"],
        flag: None,
        python: None,
        default: "off",
        doc: "`1` asks for them (`MADV_HUGEPAGE`; [benchmarks.md](benchmarks.md), \"The first \
          pass\", has what they did to a first pass)",
    },
    parse: switch,
};

/// The heap handed back.
pub const MALLOC_TRIM: Setting<bool> = Setting {
    info: Info {
        name: "free heap handed back",
        env: &["SLUICE_MALLOC_TRIM"],
        flag: None,
        python: None,
        default: "on",
        doc: "`0` stops the thread that calls glibc's `malloc_trim` every 10 s when more than 64 \
          MiB of the heap lie free, in a process that reads through a loader",
    },
    parse: switch,
};

/// Fresh buffers faulted in at once.
pub const POPULATE: Setting<bool> = Setting {
    info: Info {
        name: "fresh buffers faulted in at once",
        env: &["SLUICE_POPULATE"],
        flag: None,
        python: None,
        default: "on",
        doc: "`0` leaves a new pool buffer (4 MiB … 1 GiB) to fault page by page instead of one \
          `MADV_POPULATE_WRITE` before its bytes arrive",
    },
    parse: switch,
};

/// Buffers that outlive the process.
pub const SHM_POOL: Setting<String> = Setting {
    info: Info {
        name: "buffers that outlive the process",
        env: &["SLUICE_SHM_POOL"],
        flag: None,
        python: None,
        default: "off",
        doc: "a directory on a tmpfs such as `/dev/shm`: the buffer pool's memory lives in a file \
          `DIR/slot-N` that each process claims for its life (`flock`), so the next process \
          (the next epoch's DataLoader worker) finds its pages already there instead of fresh \
          memory the kernel must zero. The files stay until DIR is removed; `sluice-dlio` and \
          `python -m sluice.compat.alias` make one per process under `/dev/shm` and remove it \
          at exit (`off` to go without)",
    },
    parse: text,
};

/// The size of each shared-memory slot.
pub const SHM_POOL_SIZE: Setting<u64> = Setting {
    info: Info {
        name: "shared-memory slot size",
        env: &["SLUICE_SHM_POOL_SIZE"],
        flag: None,
        python: None,
        default: "4 GiB",
        doc: "caps each slot of `SLUICE_SHM_POOL`; beyond it, private memory",
    },
    parse: |s| size(s).and_then(|n| if n == 0 { Err(SIZE) } else { Ok(n) }),
};

fn text(s: &str) -> std::result::Result<String, &'static str> {
    Ok(s.to_owned())
}

/// How every `SLUICE_*` switch reads a boolean (case-insensitive); `Err` names the forms.
pub fn switch(s: &str) -> std::result::Result<bool, &'static str> {
    match s.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err("1/0, true/false, yes/no or on/off"),
    }
}

/// The AWS SDKs' checksum setting values.
fn when(s: &str) -> std::result::Result<bool, &'static str> {
    match s.to_ascii_lowercase().as_str() {
        "when_supported" => Ok(true),
        "when_required" => Ok(false),
        _ => Err("when_supported or when_required"),
    }
}

fn positive(s: &str) -> std::result::Result<usize, &'static str> {
    s.parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or("a positive integer such as 64")
}

fn attempts(s: &str) -> std::result::Result<u32, &'static str> {
    s.parse()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or("an attempt count of at least 1, such as 5")
}

/// Seconds, as `10`, `2.5`, or with a unit: `500ms`, `3s`.
pub fn seconds(s: &str) -> std::result::Result<Duration, &'static str> {
    const WANT: &str = "a duration in seconds such as 10, 2.5, 500ms or 3s";
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num.trim().parse().map_err(|_| WANT)?;
    if !(v.is_finite() && v > 0.0) {
        return Err(WANT);
    }
    Ok(Duration::from_secs_f64(v * scale))
}

const SIZE: &str = "a size such as 4G, 4GiB, 512MiB, 500KB or 1048576 (bytes)";

/// The one size grammar: bytes, as `1048576`, or with a binary or decimal unit: `16MiB`,
/// `1GiB`, `8M` (binary), `500KB` (decimal).
pub fn size(s: &str) -> std::result::Result<u64, &'static str> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "kb" => 1e3,
        "m" | "mib" => 1024.0 * 1024.0,
        "mb" => 1e6,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "gb" => 1e9,
        _ => return Err(SIZE),
    };
    let v: f64 = num.parse().map_err(|_| SIZE)?;
    Ok((v * mult).round() as u64)
}

/// The table of `docs/configuration.md`, as generated from [`ALL`].
pub fn markdown() -> String {
    let code = |v: &[&str]| {
        v.iter()
            .map(|s| format!("`{s}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = String::from(
        "| setting | variables, first found wins | flag | Python | default | what it takes |\n\
         |---|---|---|---|---|---|\n",
    );
    for s in ALL {
        let i = s.info();
        let opt = |o: Option<&str>| o.map(|f| format!("`{f}`")).unwrap_or_default();
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            i.name,
            code(i.env),
            opt(i.flag),
            opt(i.python.map(|p| format!("{p}=")).as_deref()),
            i.default,
            i.doc
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn the_first_variable_set_wins_and_blanks_are_unset() {
        let get = env(&[("SLUICE_MAX_ATTEMPTS", " "), ("AWS_MAX_ATTEMPTS", "3")]);
        assert_eq!(MAX_ATTEMPTS.read(&get).unwrap(), Some(3));
        let get = env(&[("SLUICE_MAX_ATTEMPTS", "7"), ("AWS_MAX_ATTEMPTS", "3")]);
        assert_eq!(MAX_ATTEMPTS.read(&get).unwrap(), Some(7));
        assert_eq!(MAX_ATTEMPTS.read(&env(&[])).unwrap(), None);
    }

    #[test]
    fn a_bad_value_names_its_variable_an_example_and_itself() {
        for (var, bad, example) in [
            ("SLUICE_SHM_POOL_SIZE", "lots", "4GiB"),
            ("SLUICE_SHM_POOL_SIZE", "0", "4GiB"),
            ("SLUICE_POPULATE", "maybe", "on/off"),
            ("SLUICE_THREADS", "-2", "such as 8"),
            ("AWS_MAX_ATTEMPTS", "0", "such as 5"),
            ("SLUICE_STALL_TIMEOUT", "soon", "500ms"),
        ] {
            let e = check(&env(&[(var, bad)])).unwrap_err().to_string();
            assert!(
                e.contains(var) && e.contains(example) && e.contains(bad),
                "{var}={bad}: {e}"
            );
        }
        assert!(check(&env(&[("SLUICE_SHM_POOL_SIZE", "4G")])).is_ok());
    }

    #[test]
    fn one_size_grammar_and_durations() {
        assert_eq!(size("1.5GiB"), Ok(3 << 29));
        assert_eq!(seconds("3s"), Ok(Duration::from_secs(3)));
        assert_eq!(seconds("500ms"), Ok(Duration::from_millis(500)));
        assert!(seconds("-1").is_err());
        assert_eq!(size("4G"), Ok(4 << 30));
        assert_eq!(size("4GiB"), Ok(4 << 30));
        assert_eq!(size("512MiB"), Ok(512 << 20));
        assert_eq!(size("500KB"), Ok(500_000));
        assert_eq!(size("1048576"), Ok(1 << 20));
        assert!(size("4 parsecs").is_err());
    }

    #[test]
    fn every_variable_flag_and_keyword_is_defined_once() {
        let mut seen = std::collections::HashSet::new();
        for s in ALL {
            let i = s.info();
            let names = i.env.iter().copied().chain(i.flag).chain(i.python);
            for n in names {
                assert!(seen.insert(n), "{n} is defined twice");
            }
        }
    }

    /// The docs' table is this table: regenerate it with `SLUICE_BLESS=1 cargo test -p
    /// sluice-core settings` when a setting changes.
    #[test]
    fn the_docs_table_is_generated_from_this_one() {
        const BEGIN: &str = "<!-- settings: generated from crates/core/src/settings.rs -->\n";
        const END: &str = "<!-- settings: end -->";
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let (a, b) = (
            doc.find(BEGIN).unwrap() + BEGIN.len(),
            doc.find(END).unwrap(),
        );
        let want = markdown();
        if doc[a..b] != want {
            if std::env::var_os("SLUICE_BLESS").is_some() {
                std::fs::write(path, format!("{}{want}{}", &doc[..a], &doc[b..])).unwrap();
            } else {
                panic!(
                    "docs/configuration.md's table differs from crates/core/src/settings.rs: \
                     run SLUICE_BLESS=1 cargo test -p sluice-core settings"
                );
            }
        }
    }
}
