//! A cloud's settings as read from the environment, for `azure` and `gcp`.

/// object_store's settings of one store (`K`: its config key type). Values may be secrets:
/// `Debug` shows the keys only.
#[derive(Clone)]
pub(crate) struct Settings<K> {
    entries: Vec<(K, String)>,
}

impl<K: Copy + PartialEq + AsRef<str>> Settings<K> {
    pub(crate) fn new() -> Self {
        Self {
            entries: Vec::new(),
        }
    }

    /// Sets `key`, replacing what was set before.
    pub(crate) fn set(&mut self, key: K, value: &str) {
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => value.clone_into(v),
            None => self.entries.push((key, value.to_owned())),
        }
    }

    pub(crate) fn get(&self, key: K) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn contains(&self, key: K) -> bool {
        self.get(key).is_some()
    }

    /// Whether `key` is set to a true value, as object_store reads booleans.
    pub(crate) fn is_true(&self, key: K) -> bool {
        self.get(key)
            .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes" | "on"))
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (K, &str)> {
        self.entries.iter().map(|(k, v)| (*k, v.as_str()))
    }
}

impl<K: AsRef<str>> std::fmt::Debug for Settings<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|(k, _)| k.as_ref()))
            .finish()
    }
}

/// A process environment, as name and value: the real one (`process`) or a test's.
pub(crate) struct Env(pub(crate) Vec<(String, String)>);

impl Env {
    /// An environment of exactly `vars`, for tests.
    #[cfg(test)]
    pub(crate) fn of(vars: &[(&str, &str)]) -> Self {
        Self(
            vars.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    /// The process's variables whose names begin with one of `prefixes`.
    pub(crate) fn process(prefixes: &[&str]) -> Self {
        Self(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .filter(|(k, _)| prefixes.iter().any(|p| k.starts_with(p)))
                .collect(),
        )
    }

    /// `name`'s value, trimmed; `None` when unset or blank.
    pub(crate) fn var(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// Every variable whose name object_store's key type `K` reads (lowercased, as its
    /// `from_env` does), with its value.
    pub(crate) fn keys<K: std::str::FromStr>(&self, prefix: &str) -> Vec<(K, &str)> {
        self.0
            .iter()
            .filter(|(k, v)| k.starts_with(prefix) && !v.trim().is_empty())
            .filter_map(|(k, v)| Some((k.to_ascii_lowercase().parse::<K>().ok()?, v.trim())))
            .collect()
    }
}
