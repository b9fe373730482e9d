use std::fmt;

/// An e-mail address, trimmed and lower-cased.
///
/// The check is deliberately plain: one `@`, a local part of RFC 5322 "atext" characters and single dots, a domain
/// of at least two DNS labels with a top-level label of two or more letters, at most 254 characters. That refuses
/// display names (`Alice <a@x.com>`), quoted local parts, IP-literal domains and `a@localhost`, which an account
/// e-mail has no business being, and accepts what people type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Email(Box<str>);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid e-mail address")]
pub struct EmailError;

impl Email {
    pub const MAX_LEN: usize = 254;

    pub fn parse(raw: &str) -> Result<Self, EmailError> {
        let email = raw.trim().to_ascii_lowercase();
        if email.len() > Self::MAX_LEN || !email.is_ascii() {
            return Err(EmailError);
        }
        let (local, domain) = email.split_once('@').ok_or(EmailError)?;
        if !valid_local(local) || !valid_domain(domain) {
            return Err(EmailError);
        }
        Ok(Self(email.into_boxed_str()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Rebuilds a value read from the store, where it was validated before it was written.
    pub(crate) fn from_trusted(s: String) -> Self {
        Self(s.into_boxed_str())
    }
}

fn valid_local(local: &str) -> bool {
    const SPECIALS: &[u8] = b"!#$%&'*+/=?^_`{|}~-";
    !local.is_empty()
        && local.len() <= 64
        && local
            .split('.')
            .all(|atom| !atom.is_empty() && atom.bytes().all(|b| b.is_ascii_alphanumeric() || SPECIALS.contains(&b)))
}

fn valid_domain(domain: &str) -> bool {
    let labels: Vec<&str> = domain.split('.').collect();
    let tld_ok = labels.last().is_some_and(|tld| tld.len() >= 2 && tld.bytes().all(|b| b.is_ascii_alphabetic()));
    labels.len() >= 2
        && tld_ok
        && labels.iter().all(|label| {
            (1..=63).contains(&label.len())
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_case_and_spaces() {
        assert_eq!(Email::parse("  Alice.Smith@Example.COM ").unwrap().as_str(), "alice.smith@example.com");
    }

    #[test]
    fn accepts_ordinary_addresses() {
        for ok in ["a@b.co", "first.last+tag@sub.example.org", "o'neil@x.ie", "x_y-z@a-b.example"] {
            assert!(Email::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn refuses_what_is_not_an_account_address() {
        let long = format!("{}@example.com", "a".repeat(250));
        for bad in [
            "",
            "no-at-sign",
            "a@b",
            "a@localhost",
            "Alice <a@x.com>",
            "a@@x.com",
            "a@x@y.com",
            "a..b@x.com",
            ".a@x.com",
            "a.@x.com",
            "a@-x.com",
            "a@x-.com",
            "a@x..com",
            "a@x.c",
            "a@x.c0m",
            "a b@x.com",
            "\"quoted\"@x.com",
            "a@[127.0.0.1]",
            "ü@x.com",
            "a@x.com\nb",
            &long,
        ] {
            assert!(Email::parse(bad).is_err(), "{bad:?}");
        }
    }
}
