use std::fmt;

/// A picture's URL as every call that takes one keeps it (sign-up, update-user, the admin plugin's update-user,
/// `import-better-auth`): an absolute `http:` or `https:` URL with a host, at most [`MAX_LEN`](Self::MAX_LEN)
/// characters as given, held in the parsed, normalised form an admin screen can put in `<img src>` as it is.
/// The bound is on what the caller sends (the documented limit): the normalised form may be longer, since
/// percent-encoding a character triples it and an empty path gains its `/`, so it is at most `3 × MAX_LEN + 1`
/// bytes.
///
/// Normalised: serialised by the URL parser (scheme and host in lower case, the path resolved), which
/// percent-encodes `"`, `<` and `>` everywhere; the single quote and the backtick, which the parser leaves in
/// some parts, are percent-encoded as well. So `https://x.test/a.png?"><img/src=x/onerror=alert(4)>` is kept as
/// `https://x.test/a.png?%22%3E%3Cimg/src=x/onerror=alert(4)%3E`: the same address to any HTTP server, and
/// nothing that closes an HTML attribute wherever a page puts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageUrl(Box<str>);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ImageUrlError {
    #[error("Too big: expected string to have <=2048 characters")]
    TooLong,
    #[error("Invalid URL: expected an absolute http or https URL")]
    NotWebUrl,
}

/// What the parser leaves unencoded in some part of a URL and an HTML attribute would end at.
const QUOTES: [(char, &str); 2] = [('\'', "%27"), ('`', "%60")];

impl ImageUrl {
    pub const MAX_LEN: usize = 2048;

    pub fn parse(raw: &str) -> Result<Self, ImageUrlError> {
        if raw.chars().count() > Self::MAX_LEN {
            return Err(ImageUrlError::TooLong);
        }
        // The parser would quietly strip some of these (tabs, newlines, leading and trailing spaces): refused,
        // so that what is kept is what was meant.
        if raw.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(ImageUrlError::NotWebUrl);
        }
        let url = url::Url::parse(raw).map_err(|_| ImageUrlError::NotWebUrl)?;
        let host = url.host_str().filter(|h| !h.is_empty()).ok_or(ImageUrlError::NotWebUrl)?;
        // A host may not be percent-encoded, and no real one holds a quote or an angle bracket.
        if !matches!(url.scheme(), "http" | "https") || host.contains(['"', '\'', '`', '<', '>']) {
            return Err(ImageUrlError::NotWebUrl);
        }
        let mut normal = String::from(url);
        for (c, encoded) in QUOTES {
            if normal.contains(c) {
                normal = normal.replace(c, encoded);
            }
        }
        Ok(Self(normal.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<ImageUrl> for Box<str> {
    fn from(url: ImageUrl) -> Self {
        url.0
    }
}

impl From<ImageUrl> for String {
    fn from(url: ImageUrl) -> Self {
        url.0.into()
    }
}

impl fmt::Display for ImageUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(raw: &str) -> String {
        ImageUrl::parse(raw).unwrap_or_else(|e| panic!("{raw:?}: {e}")).to_string()
    }

    #[test]
    fn web_urls_are_kept_normalised() {
        assert_eq!(kept("https://cdn.example.com/a.png?size=64"), "https://cdn.example.com/a.png?size=64");
        assert_eq!(kept("HTTP://Example.COM/a/../b.png"), "http://example.com/b.png");
        assert_eq!(
            kept("https://x.test/a.png?\"><img/src=x/onerror=alert(4)>"),
            "https://x.test/a.png?%22%3E%3Cimg/src=x/onerror=alert(4)%3E"
        );
        assert_eq!(
            kept("https://x.test/it's/`t`/<b>\"q\"?'`\"<>#\"f'`<>"),
            "https://x.test/it%27s/%60t%60/%3Cb%3E%22q%22?%27%60%22%3C%3E#%22f%27%60%3C%3E"
        );
        assert_eq!(kept("https://us'er:p\"w@x.test/"), "https://us%27er:p%22w@x.test/");
        // Already normalised: kept as it is.
        let once = kept("https://x.test/a.png?%22%3E");
        assert_eq!(kept(&once), once);
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            "javascript:alert(1)",
            "data:image/png;base64,AAAA",
            "/relative.png",
            "https://",
            "https://a.com/\u{7}",
            "https://a.com/a b.png",
            "ftp://example.com/a.png",
            "https://a.com/\n",
            "https://x'y.test/a.png",
            "https://x\"y.test/a.png",
            "file:///etc/passwd",
        ] {
            assert_eq!(ImageUrl::parse(bad), Err(ImageUrlError::NotWebUrl), "{bad:?}");
        }
        let long = format!("https://x.test/{}", "a".repeat(2048));
        assert_eq!(ImageUrl::parse(&long), Err(ImageUrlError::TooLong));
        // The bound is on what is sent: within it, a URL is kept whole however much its encoding lengthens it.
        let quotes = format!("https://x.test/{}", "'".repeat(2000));
        assert_eq!(kept(&quotes).len(), "https://x.test/".len() + 3 * 2000);
        let bare_host = format!("https://a{}", "0".repeat(2048 - "https://a".len()));
        assert_eq!(kept(&bare_host), format!("{bare_host}/"), "2048 characters, and the path's `/`");
    }
}
