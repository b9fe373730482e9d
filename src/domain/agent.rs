use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// A client's user agent, as a session records it. A million sessions come from a few thousand browsers and
/// versions, so the sessions with the same user agent share one copy of it (the sessions index hands it out):
/// an `Arc`, cloned, never copied. A thin one (to a boxed `str`, not to the text itself), 8 bytes in a session
/// instead of 16: reading the text takes one more pointer, and the copies are few and hot.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct UserAgent(Arc<Box<str>>);

impl UserAgent {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// How many holders this copy has, itself included.
    pub fn holders(&self) -> usize {
        Arc::strong_count(&self.0)
    }
}

impl Deref for UserAgent {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

/// A set of user agents is searched by the text.
impl Borrow<str> for UserAgent {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for UserAgent {
    fn from(s: &str) -> Self {
        Self(Arc::new(s.into()))
    }
}

impl From<String> for UserAgent {
    fn from(s: String) -> Self {
        Self(Arc::new(s.into_boxed_str()))
    }
}

impl fmt::Display for UserAgent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
