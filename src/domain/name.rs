use std::fmt;

/// A display name (of a user or an organization): 1 to 200 characters after trimming, no control characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Name(Box<str>);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("must not be empty")]
    Empty,
    #[error("must be at most 200 characters")]
    TooLong,
    #[error("must not contain control characters")]
    ControlCharacter,
    #[error("must not contain bidirectional control characters")]
    Bidi,
    #[error("must not contain line or paragraph separators")]
    LineSeparator,
    #[error("must contain a visible character")]
    Invisible,
}

/// Characters that reorder the text around them (embeddings, overrides, isolates, marks). In a name they can make
/// "Alice (admin)" display as something else in an admin screen; no real name needs them.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Characters that show nothing: white space, and the format and filler characters that render as blank
/// (zero-width space and joiners, word joiner, soft hyphen, Hangul fillers, variation selectors, tags…). A name
/// made of these alone looks empty in every screen yet is not.
fn is_invisible(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{115F}'
                | '\u{1160}'
                | '\u{17B4}'
                | '\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{200B}'..='\u{200D}'
                | '\u{2060}'..='\u{2064}'
                | '\u{206A}'..='\u{206F}'
                | '\u{2800}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E0FFF}'
        )
}

impl Name {
    pub const MAX_CHARS: usize = 200;

    pub fn parse(raw: &str) -> Result<Self, NameError> {
        let name = raw.trim();
        if name.is_empty() {
            Err(NameError::Empty)
        } else if name.chars().count() > Self::MAX_CHARS {
            Err(NameError::TooLong)
        } else if name.chars().any(char::is_control) {
            // A newline or NUL in a name ends up in admin screens, CSV exports and log lines.
            Err(NameError::ControlCharacter)
        } else if name.chars().any(is_bidi_control) {
            Err(NameError::Bidi)
        } else if name.contains(['\u{2028}', '\u{2029}']) {
            // Not control characters to Unicode, but line breaks to every renderer: a second line in a name.
            Err(NameError::LineSeparator)
        } else if name.chars().all(is_invisible) {
            Err(NameError::Invisible)
        } else {
            Ok(Self(name.into()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub(crate) fn from_trusted(s: String) -> Self {
        Self(s.into_boxed_str())
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bidirectional_controls_are_refused() {
        for c in ['\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}', '\u{2066}', '\u{2069}', '\u{200F}'] {
            assert_eq!(Name::parse(&format!("Alice{c}nimda")), Err(NameError::Bidi), "{:?}", c);
        }
        assert!(Name::parse("شركة الصيدلة").is_ok(), "right-to-left text itself is fine");
    }

    #[test]
    fn names_that_show_nothing_or_break_lines_are_refused() {
        for blank in ["\u{200B}", "\u{200B}\u{200C}\u{200D}", "\u{2060}\u{FEFF}", "\u{3164}", "\u{00AD} \u{200B}"] {
            assert_eq!(Name::parse(blank), Err(NameError::Invisible), "{:?}", blank);
        }
        for c in ['\u{2028}', '\u{2029}'] {
            assert_eq!(Name::parse(&format!("Ann{c}URGENT: read this")), Err(NameError::LineSeparator), "{:?}", c);
        }
        assert!(Name::parse("Ann\u{200D}Lee").is_ok(), "a joiner beside visible letters is fine");
        assert!(Name::parse("👩\u{200D}💻").is_ok(), "emoji sequences use joiners");
    }

    #[test]
    fn trims_and_bounds() {
        assert_eq!(Name::parse("  Ada Lovelace ").unwrap().as_str(), "Ada Lovelace");
        assert_eq!(Name::parse("   "), Err(NameError::Empty));
        assert!(Name::parse(&"é".repeat(200)).is_ok());
        assert_eq!(Name::parse(&"é".repeat(201)), Err(NameError::TooLong));
        assert_eq!(Name::parse("a\u{0}b"), Err(NameError::ControlCharacter));
    }
}
