//! Which log records are kept: one rule for the CLI (which prints them) and Python (which
//! hands them to `logging`): sluice's own records — retries, resumed bodies, redirects
//! followed, endpoints avoided, aborted uploads — by their level, other crates' (hyper, the
//! AWS SDK) from `warn`.

use sluice_core::{Error, Result};
use tracing_subscriber::EnvFilter;

/// sluice's notable events (retries, resumes, redirects, endpoints avoided) and every
/// crate's warnings: what Python receives when neither variable is set (its `logging` levels
/// then choose what is shown).
pub const EVENTS: &str = "warn,sluice=info";

/// `level` for sluice's records over `warn` for the rest when given; else `SLUICE_LOG`, else
/// `RUST_LOG` (tracing's `EnvFilter` syntax: `debug`, `warn,sluice_core=debug`, ...), else
/// `default`. A malformed value is an `InvalidConfig` naming where it came from.
pub fn filter(level: Option<&str>, default: &str) -> Result<EnvFilter> {
    if let Some(level) = level {
        return parse("--log-level", &format!("warn,sluice={level}"));
    }
    match sluice_core::settings::LOG.lookup(&|k| std::env::var(k).ok()) {
        Some((var, v)) => parse(var, &v),
        None => parse("default", default),
    }
}

fn parse(option: &str, spec: &str) -> Result<EnvFilter> {
    EnvFilter::builder()
        .parse(spec)
        .map_err(|e| Error::config(option, format!("{spec:?} is not a log filter: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_applies_to_sluice_and_a_bad_one_is_named() {
        assert_eq!(
            filter(Some("debug"), "warn").unwrap().to_string(),
            EnvFilter::new("warn,sluice=debug").to_string()
        );
        let e = filter(Some("loud"), "warn").unwrap_err().to_string();
        assert!(e.contains("--log-level") && e.contains("loud"), "{e}");
        assert!(parse("default", EVENTS).is_ok());
    }
}
