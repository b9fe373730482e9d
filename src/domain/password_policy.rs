//! What a new password must be beyond its bounds ([`Password::new`]): NIST SP 800-63B-4 §3.1.1.2 and OWASP ASVS
//! 5.0 6.2.4, 6.2.11 and 6.2.12. Checked wherever a password is chosen (sign-up, change, reset, an administrator's
//! create and set, the first administrator's setup); never at sign-in, so that a policy change locks nobody out.
//!
//! - **Length:** at least [`PasswordPolicy::min_length`] for an account whose password is its only factor (NIST:
//!   15), and at least [`PasswordPolicy::min_length_with_second_factor`] when the account has an authenticator on
//!   (NIST: 8, the password being then one factor of two).
//! - **Breached and common passwords:** refused when on the list shipped in the binary ([`is_listed`]): every
//!   entry of 8 characters or more of a SecLists-derived list whose first 100,000 lines are the most common
//!   passwords of the "10 million passwords" breach corpus (`docs/password-list.md` names the source, its licence
//!   and how the file is rebuilt). Compared case-insensitively: `Password1` is as guessable as `password1`.
//! - **Context words:** refused when the password contains the service's name, the e-mail address's local part
//!   or a word of the account's name ([`Context`]); words shorter than [`MIN_CONTEXT_WORD`] are not looked for,
//!   or a two-letter name would refuse half the passwords there are.

use std::sync::LazyLock;

use unicode_normalization::UnicodeNormalization;

use super::Password;

/// The list: an `fst` set of the normalised entries ([`list_key`]), sorted, built by
/// `cargo run --example password_list` (see `docs/password-list.md`).
static LIST_BYTES: &[u8] = include_bytes!("breached_passwords.fst");

static LIST: LazyLock<fst::Set<&'static [u8]>> =
    LazyLock::new(|| fst::Set::new(LIST_BYTES).expect("the shipped password list is a valid fst set"));

/// The shortest context word looked for, in characters.
pub const MIN_CONTEXT_WORD: usize = 4;

/// Why a new password is refused. The messages are the ones clients see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PasswordRefused {
    /// Shorter than the account's minimum (15 for a password-only account by default).
    #[error("Password too short")]
    TooShort { min: usize },
    /// On the list of breached and common passwords, or (when configured) found by the range lookup. The message
    /// is better-auth's `haveIBeenPwned` plugin's.
    #[error("The password you entered has been compromised. Please choose a different password.")]
    Compromised,
    /// Contains the service's name, the e-mail address's local part or a word of the account's name.
    #[error(
        "The password contains the service's name, your name or your e-mail address. Please choose a different password."
    )]
    ContextWord,
}

/// What a password is checked against besides itself: the account it is for.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The account's e-mail address (its local part is a context word).
    pub email: &'a str,
    /// The account's name (each word of it is a context word).
    pub name: &'a str,
    /// The account has an authenticator on: the password is then one factor of two.
    pub second_factor: bool,
}

/// The configured rules ([`crate::config`]'s `[passwords]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasswordPolicy {
    pub min_length: usize,
    pub min_length_with_second_factor: usize,
    /// The service's names (the configured words and the authenticator issuer), normalised as passwords are
    /// compared ([`list_key`]), each at least [`MIN_CONTEXT_WORD`] long.
    service_words: Vec<String>,
}

impl PasswordPolicy {
    pub fn new(min_length: usize, min_length_with_second_factor: usize, service_words: &[&str]) -> Self {
        // The whole name, and the same without its spaces and punctuation ("Acme Pharmacy", "acmepharmacy"); not
        // each of its words, or a service called "Online Shop" would refuse every password with "shop" in it.
        let mut words: Vec<String> = Vec::new();
        for name in service_words {
            let key = list_key(name.trim());
            let joined: String = key.chars().filter(|c| c.is_alphanumeric()).collect();
            for word in [key, joined] {
                if word.chars().count() >= MIN_CONTEXT_WORD && !words.contains(&word) {
                    words.push(word);
                }
            }
        }
        Self { min_length, min_length_with_second_factor, service_words: words }
    }

    /// Checks `password` for the account `context` describes: length first (the cheapest), then the list, then
    /// the context words.
    pub fn check(&self, password: &Password, context: Context<'_>) -> Result<(), PasswordRefused> {
        let min = if context.second_factor { self.min_length_with_second_factor } else { self.min_length };
        if password.as_str().chars().count() < min {
            return Err(PasswordRefused::TooShort { min });
        }
        let key = list_key(password.as_str());
        if LIST.contains(&key) {
            return Err(PasswordRefused::Compromised);
        }
        let mut words = Vec::new();
        let local = context.email.rsplit_once('@').map_or(context.email, |(local, _)| local);
        push_words(&mut words, local, true);
        push_words(&mut words, context.name, false);
        if self.service_words.iter().chain(&words).any(|w| key.contains(w.as_str())) {
            return Err(PasswordRefused::ContextWord);
        }
        Ok(())
    }
}

impl Default for PasswordPolicy {
    fn default() -> Self {
        Self::new(15, 8, &["service-auth"])
    }
}

/// Whether the shipped list holds `password` (compared as [`list_key`] makes it).
pub fn is_listed(password: &Password) -> bool {
    LIST.contains(list_key(password.as_str()))
}

/// How many entries the shipped list holds.
pub fn listed_count() -> usize {
    LIST.len()
}

/// The form passwords and list entries are compared in: NFKC (as [`Password`] keeps it), then lower-case.
pub fn list_key(text: &str) -> String {
    text.nfkc().flat_map(char::to_lowercase).collect()
}

/// Adds the context words of `text` to `words`: the whole of it (when `whole`: an e-mail local part) and each run
/// of letters and digits in it, those long enough to look for.
fn push_words(words: &mut Vec<String>, text: &str, whole: bool) {
    let key = list_key(text.trim());
    let long_enough = |w: &str| w.chars().count() >= MIN_CONTEXT_WORD;
    if whole && long_enough(&key) {
        words.push(key.clone());
    }
    for part in key.split(|c: char| !c.is_alphanumeric()) {
        if long_enough(part) && !words.iter().any(|w| w == part) {
            words.push(part.to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn password(text: &str) -> Password {
        Password::new(text).unwrap()
    }

    const ALICE: Context<'static> =
        Context { email: "alice.smith@example.com", name: "Alice Smith", second_factor: false };

    #[test]
    fn the_list_holds_the_most_common_passwords_of_eight_characters_or_more() {
        for common in ["password", "12345678", "iloveyou", "PASSWORD", "Password1", "qwertyuiop", "1q2w3e4r"] {
            assert!(is_listed(&password(common)), "{common}");
        }
        assert!(!is_listed(&password("correct horse battery staple 42")));
        assert!(listed_count() >= 100_000, "{}", listed_count());
    }

    /// Every entry is as [`list_key`] makes it, within a password's bounds, and in order (`fst` requires it; a
    /// rebuilt file that broke this would refuse to load).
    #[test]
    fn every_entry_is_a_normalised_password() {
        use fst::Streamer;
        let mut stream = LIST.stream();
        let mut count = 0;
        while let Some(entry) = stream.next() {
            let entry = std::str::from_utf8(entry).expect("UTF-8");
            assert_eq!(list_key(entry), entry);
            assert!((8..=Password::MAX_CHARS).contains(&entry.chars().count()), "{entry:?}");
            count += 1;
        }
        assert_eq!(count, listed_count());
    }

    #[test]
    fn the_minimum_depends_on_a_second_factor() {
        let policy = PasswordPolicy::default();
        let fourteen = password("xkq7 vbn3 zmw9");
        assert_eq!(policy.check(&fourteen, ALICE), Err(PasswordRefused::TooShort { min: 15 }));
        assert_eq!(policy.check(&fourteen, Context { second_factor: true, ..ALICE }), Ok(()));
        assert_eq!(policy.check(&password("xkq7 vbn3 zmw9 p"), ALICE), Ok(()));
    }

    #[test]
    fn a_listed_password_is_refused_in_any_case() {
        let policy = PasswordPolicy::new(8, 8, &[]);
        assert_eq!(policy.check(&password("Password123"), ALICE), Err(PasswordRefused::Compromised));
        assert_eq!(policy.check(&password("PASSWORD123"), ALICE), Err(PasswordRefused::Compromised));
    }

    #[test]
    fn context_words_are_refused() {
        let policy = PasswordPolicy::new(8, 8, &["Acme Pharmacy"]);
        for refused in
            ["my alice password", "SMITHsmith-42-xq", "acmepharmacy 4ever", "ACME pharmacy 99", "alice.smith99"]
        {
            assert_eq!(policy.check(&password(refused), ALICE), Err(PasswordRefused::ContextWord), "{refused}");
        }
        // The service's name as a whole, not each of its words.
        assert_eq!(policy.check(&password("x pharmacy 99 y"), ALICE), Ok(()));
        // Words shorter than four characters are not looked for.
        let al = Context { email: "al@example.com", name: "Al Bo", second_factor: false };
        assert_eq!(policy.check(&password("always bold 1974"), al), Ok(()));
        // The default service name.
        let default = PasswordPolicy::default();
        assert_eq!(default.check(&password("my service-auth pass"), ALICE), Err(PasswordRefused::ContextWord));
    }
}
