use std::fmt;

/// An organization slug: 1 to 63 characters of `a-z`, `0-9` and `-`, not starting or ending with `-` (a DNS
/// label, so it also works as a subdomain). Not lower-cased for the caller: `Pharmacy` is refused rather than
/// silently becoming a different string than the one sent.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slug(String);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("slug must be 1 to 63 characters of a-z, 0-9 and '-', not starting or ending with '-'")]
pub struct SlugError;

impl Slug {
    pub fn parse(s: &str) -> Result<Self, SlugError> {
        let ok = (1..=63).contains(&s.len())
            && !s.starts_with('-')
            && !s.ends_with('-')
            && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if ok { Ok(Self(s.to_owned())) } else { Err(SlugError) }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub(crate) fn from_trusted(s: String) -> Self {
        Self(s)
    }
}

impl fmt::Display for Slug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        for ok in ["a", "st-marys-pharmacy", "x1", &"a".repeat(63)] {
            assert!(Slug::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a b", "é", &"a".repeat(64)] {
            assert!(Slug::parse(bad).is_err(), "{bad}");
        }
    }
}
