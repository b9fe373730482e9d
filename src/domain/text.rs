//! What no free text a person sets may hold, whoever sets it: a ban reason here, names in `name.rs` (which keeps
//! its own copy of the bidirectional rule for now). Such text ends up in admin screens, CSV exports, audit rows
//! and log lines, where a control character (a newline, BEL, an ANSI escape) or a reordering mark can change
//! what the reader sees.

/// Why a character is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// A C0 or C1 control (newline, BEL, ESC…), or a line or paragraph separator (U+2028, U+2029), which break
    /// a line as a newline does.
    Control,
    /// A character that reorders the text around it (embeddings, overrides, isolates, marks): "a\u{202E}gnp.exe"
    /// displays as "aexe.png".
    Bidi,
}

/// Characters that reorder the text around them. No name or reason needs them; right-to-left text itself does
/// not.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// The first refused character of `text`, if any, and why.
pub fn refused(text: &str) -> Option<Refused> {
    text.chars().find_map(|c| {
        if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
            Some(Refused::Control)
        } else if is_bidi_control(c) {
            Some(Refused::Bidi)
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_separators_and_bidi_marks_are_refused() {
        assert_eq!(refused("a\u{202E}gnp.exe"), Some(Refused::Bidi));
        assert_eq!(refused("ring\u{7}"), Some(Refused::Control));
        assert_eq!(refused("\u{1b}[31mred"), Some(Refused::Control));
        assert_eq!(refused("two\u{2028}lines"), Some(Refused::Control));
        assert_eq!(refused("c1\u{85}"), Some(Refused::Control));
        assert_eq!(refused("Spam, and a broken promise — «غير مرغوب»"), None);
    }
}
