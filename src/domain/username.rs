//! Usernames, as better-auth's `username` plugin takes them: 3 to 30 characters of `[A-Za-z0-9_.]` by default,
//! checked as typed (the plugin's default `validationOrder`), then normalised; and the display form, kept as
//! typed. Beyond the plugin, a name that looks like another (its confusable skeleton, Unicode TS #39) or like a
//! reserved one is refused as taken, so `paypa1` cannot pass for `paypal`, nor `adrnin` for `admin`.

use std::fmt;

use unicode_normalization::UnicodeNormalization;

/// Names nobody may take: they read as the service speaking, or as its staff (docs/guides/usernames.md lists them;
/// `[username] reserved` adds more). Compared by skeleton, so their look-alikes are reserved too.
pub const RESERVED: &[&str] = &[
    "abuse",
    "account",
    "admin",
    "administrator",
    "api",
    "auth",
    "billing",
    "help",
    "hostmaster",
    "info",
    "login",
    "mail",
    "me",
    "moderator",
    "noreply",
    "no_reply",
    "null",
    "owner",
    "postmaster",
    "root",
    "security",
    "service",
    "settings",
    "signin",
    "signup",
    "staff",
    "superuser",
    "support",
    "sysadmin",
    "system",
    "undefined",
    "webmaster",
    "www",
];

/// A username, normalised: NFKC, then lower-case (the plugin lower-cases; NFKC makes the compatibility forms of a
/// character, full-width letters say, one name should a wider validator ever let them in). What uniqueness and
/// sign-in compare.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Username(Box<str>);

/// Why a username is refused, with the plugin's codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UsernameError {
    #[error("Username is too short")]
    TooShort,
    #[error("Username is too long")]
    TooLong,
    #[error("Username is invalid")]
    Invalid,
}

impl UsernameError {
    /// better-auth's error code.
    pub fn code(self) -> &'static str {
        match self {
            Self::TooShort => "USERNAME_TOO_SHORT",
            Self::TooLong => "USERNAME_TOO_LONG",
            Self::Invalid => "INVALID_USERNAME",
        }
    }
}

/// The plugin's `minUsernameLength` and `maxUsernameLength`, and the reserved names (as skeletons).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsernameRules {
    pub min: usize,
    pub max: usize,
    reserved: Vec<Box<str>>,
}

impl Default for UsernameRules {
    fn default() -> Self {
        Self::new(3, 30, &[])
    }
}

impl UsernameRules {
    /// The built-in reserved names and `more`.
    pub fn new(min: usize, max: usize, more: &[String]) -> Self {
        let mut reserved: Vec<Box<str>> =
            RESERVED.iter().copied().chain(more.iter().map(String::as_str)).map(skeleton_of).collect();
        reserved.sort_unstable();
        reserved.dedup();
        Self { min, max, reserved }
    }

    /// `typed` checked as the plugin checks it (length in characters, then `[A-Za-z0-9_.]`), then normalised.
    pub fn parse(&self, typed: &str) -> Result<Username, UsernameError> {
        let chars = typed.chars().count();
        if chars < self.min {
            return Err(UsernameError::TooShort);
        }
        if chars > self.max {
            return Err(UsernameError::TooLong);
        }
        if !typed.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.') {
            return Err(UsernameError::Invalid);
        }
        Ok(Username(typed.nfkc().flat_map(char::to_lowercase).collect::<String>().into_boxed_str()))
    }

    /// Whether `name` is, or looks like, a reserved name.
    pub fn is_reserved(&self, name: &Username) -> bool {
        self.is_reserved_skeleton(&name.skeleton())
    }

    /// Whether a text of this skeleton ([`skeleton_of`]) looks like a reserved name.
    pub fn is_reserved_skeleton(&self, skeleton: &str) -> bool {
        self.reserved.binary_search_by(|r| (**r).cmp(skeleton)).is_ok()
    }
}

/// The confusable skeleton (Unicode TS #39) of `text`, lower-cased: two names with one skeleton look alike
/// (`paypa1` and `paypal`, `adrnin` and `admin`, a Cyrillic `а` and a Latin `a`). Taken before lower-casing too
/// where that differs, by the callers that check a display form (`PayPaI` is `paypai` lower-cased, but shows as
/// `PayPal`).
pub fn skeleton_of(text: &str) -> Box<str> {
    let normal: String = text.nfkc().flat_map(char::to_lowercase).collect();
    unicode_security::skeleton(&normal).flat_map(char::to_lowercase).collect::<String>().into_boxed_str()
}

impl Username {
    /// `raw` normalised as a new name is (NFKC, lower-case), without the format check: an imported name, which
    /// better-auth's own validator (perhaps another than the default) accepted.
    pub fn normalised(raw: &str) -> Self {
        Self(raw.nfkc().flat_map(char::to_lowercase).collect::<String>().into_boxed_str())
    }

    /// A name read back from the store (or an import), checked when it was first set: not checked again, so a
    /// tightened rule cannot make old accounts unloadable.
    pub fn from_trusted(name: impl Into<Box<str>>) -> Self {
        Self(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// What names that look like this one share.
    pub fn skeleton(&self) -> Box<str> {
        skeleton_of(&self.0)
    }
}

impl fmt::Display for Username {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The display form (better-auth's `displayUsername`): as typed, at most 100 characters, without the characters
/// no free text may hold (controls, reordering marks: see `text.rs`), since it is shown in the console.
pub fn display_username(typed: &str) -> Result<Box<str>, DisplayUsernameError> {
    if typed.trim().is_empty() || typed.chars().count() > 100 || super::text::refused(typed).is_some() {
        return Err(DisplayUsernameError);
    }
    Ok(typed.into())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("Display username is invalid")]
pub struct DisplayUsernameError;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugins_rules_then_lower_case() {
        let rules = UsernameRules::default();
        assert_eq!(rules.parse("Ana_B.42").unwrap().as_str(), "ana_b.42");
        assert_eq!(rules.parse("ab"), Err(UsernameError::TooShort));
        assert_eq!(rules.parse(&"a".repeat(31)), Err(UsernameError::TooLong));
        assert!(rules.parse(&"a".repeat(30)).is_ok());
        for bad in ["ana b", "ana-b", "ana@b", "ａｎａ", "аnа"] {
            assert_eq!(rules.parse(bad), Err(UsernameError::Invalid), "{bad}");
        }
    }

    #[test]
    fn look_alikes_share_a_skeleton_and_reserved_names_their_look_alikes() {
        let rules = UsernameRules::new(3, 30, &["acme".into()]);
        let name = |s| rules.parse(s).unwrap();
        assert_eq!(name("paypa1").skeleton(), name("PayPal").skeleton());
        assert_eq!(name("adrnin").skeleton(), name("admin").skeleton());
        assert_ne!(name("alice").skeleton(), name("alicia").skeleton());
        for reserved in ["admin", "ROOT", "adrnin", "r0ot", "support", "acme"] {
            assert!(rules.is_reserved(&name(reserved)), "{reserved}");
        }
        assert!(!rules.is_reserved(&name("alice")));
    }

    #[test]
    fn the_display_form_is_kept_as_typed_without_controls() {
        assert_eq!(&*display_username("Ana B.").unwrap(), "Ana B.");
        assert!(display_username("a\u{202E}b").is_err());
        assert!(display_username("a\nb").is_err());
        assert!(display_username(" ").is_err());
        assert!(display_username(&"x".repeat(101)).is_err());
    }
}
