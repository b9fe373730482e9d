//! `[oauth]` and `[[oauth.providers]]`: which identity providers users may sign in with. Checked at load (and so
//! by `check-config`); the client secrets are read at load from an environment variable or a file, never from
//! the configuration file itself, and never written to a log (their `Debug` is redacted).

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct OAuthConfig {
    /// Keep the provider's access, refresh and ID tokens with the linked account, sealed with the data
    /// directory's key (src/data_key.rs). Off (the default): they are used once at the callback and dropped.
    pub store_tokens: bool,
    pub providers: Vec<ProviderConfig>,
}

/// How a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenID Connect: discovery from the issuer, an ID token checked against the provider's keys.
    Oidc,
    /// GitHub: OAuth 2 and its user API (it issues no ID token).
    Github,
}

/// Presets: the issuer (or endpoints) and scopes of well-known providers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    Google,
    /// Microsoft Entra ID, one tenant (`tenant`).
    Microsoft,
    Apple,
    Github,
}

#[derive(Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// The name clients use (`provider` / `providerId`) and the last segment of the callback URL.
    pub id: String,
    #[serde(default)]
    pub preset: Option<Preset>,
    /// Implied by the preset; `oidc` otherwise.
    #[serde(default)]
    pub kind: Option<ProviderKind>,
    /// OpenID Connect: the issuer URL (discovery reads `<issuer>/.well-known/openid-configuration`). Implied by
    /// the google, microsoft and apple presets.
    #[serde(default)]
    pub issuer: Option<String>,
    /// microsoft: the tenant's id or domain (not `common`: the ID token's issuer must be one known tenant).
    #[serde(default)]
    pub tenant: Option<String>,
    pub client_id: String,
    /// The name of the environment variable holding the client secret.
    #[serde(default)]
    pub client_secret_env: Option<String>,
    /// A file holding the client secret (relative to config.toml); surrounding whitespace is ignored.
    #[serde(default)]
    pub client_secret_file: Option<PathBuf>,
    /// Scopes asked for; the preset's (or `openid email profile`) when empty.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Whether this provider's *verified* e-mail addresses may sign into an existing account with the same
    /// address (linking the identity to it). Off: such a sign-in is refused, and the owner links the identity
    /// after signing in.
    #[serde(default)]
    pub trusted_for_linking: bool,
    /// Whether an address this provider does *not* assert as verified may make a new account. Off (the default):
    /// such a sign-in is refused (`email_not_verified`), since whoever signs in first with someone else's address
    /// would hold the account its owner later recovers.
    #[serde(default)]
    pub allow_unverified_email_sign_up: bool,
    /// The secret, read at load; never serialised or logged.
    #[serde(skip)]
    pub client_secret: Option<Secret>,
    /// The client authenticates at the token endpoint with its secret in the form (`client_secret_post`) rather
    /// than HTTP Basic: not a setting of `[[oauth.providers]]` (Basic serves them all), but what an organization's
    /// single sign-on provider may be registered with (src/accounts/sso.rs).
    #[serde(skip)]
    pub secret_in_body: bool,
}

impl fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("id", &self.id)
            .field("kind", &self.kind())
            .field("issuer", &self.issuer_url())
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret)
            .finish_non_exhaustive()
    }
}

/// A client secret: compared and sent, never shown.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl ProviderConfig {
    pub fn kind(&self) -> ProviderKind {
        match (self.kind, self.preset) {
            (Some(kind), _) => kind,
            (None, Some(Preset::Github)) => ProviderKind::Github,
            (None, _) => ProviderKind::Oidc,
        }
    }

    /// The issuer, as given or as the preset implies.
    pub fn issuer_url(&self) -> Option<String> {
        if let Some(issuer) = &self.issuer {
            return Some(issuer.trim_end_matches('/').to_owned());
        }
        match self.preset? {
            Preset::Google => Some("https://accounts.google.com".into()),
            Preset::Apple => Some("https://appleid.apple.com".into()),
            Preset::Microsoft => Some(format!("https://login.microsoftonline.com/{}/v2.0", self.tenant.as_deref()?)),
            Preset::Github => None,
        }
    }

    pub fn scopes(&self) -> Vec<String> {
        if !self.scopes.is_empty() {
            return self.scopes.clone();
        }
        let default: &[&str] = match (self.preset, self.kind()) {
            (_, ProviderKind::Github) => &["read:user", "user:email"],
            // Apple gives the address only in the ID token, and only with this scope.
            (Some(Preset::Apple), _) => &["openid", "email"],
            _ => &["openid", "email", "profile"],
        };
        default.iter().map(|s| (*s).to_owned()).collect()
    }

    /// Extra parameters of the authorization request: Apple answers with a form POST when asked for `email`.
    pub fn response_mode(&self) -> Option<&'static str> {
        (self.preset == Some(Preset::Apple)).then_some("form_post")
    }
}

impl OAuthConfig {
    /// Checks every provider; the error is (key, problem).
    pub fn validate(&self) -> Result<(), (String, String)> {
        let fail = |key: String, problem: String| Err((key, problem));
        let mut seen = std::collections::HashSet::new();
        for (i, p) in self.providers.iter().enumerate() {
            let key = |field: &str| format!("oauth.providers[{i}].{field}");
            if p.id.is_empty()
                || p.id.len() > 64
                || !p.id.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-".contains(&b))
            {
                return fail(key("id"), format!("= {:?} must be 1 to 64 characters of A-Z a-z 0-9 _ -", p.id));
            }
            // "credential" is the password's name in list-accounts.
            if p.id == "credential" || !seen.insert(p.id.clone()) {
                return fail(key("id"), format!("= {:?} is used twice (or is the reserved \"credential\")", p.id));
            }
            if p.client_id.is_empty() {
                return fail(key("client_id"), "must be set".into());
            }
            if p.client_secret_env.is_some() == p.client_secret_file.is_some() && p.client_secret.is_none() {
                return fail(key("client_secret_env"), "or client_secret_file must be set (exactly one)".into());
            }
            match (p.kind(), p.preset) {
                (ProviderKind::Github, Some(preset)) if preset != Preset::Github => {
                    return fail(key("kind"), "= \"github\" does not go with this preset".into());
                }
                (ProviderKind::Oidc, Some(Preset::Github)) => {
                    return fail(key("kind"), "= \"oidc\" does not go with preset = \"github\"".into());
                }
                _ => {}
            }
            if p.preset == Some(Preset::Microsoft) {
                match p.tenant.as_deref() {
                    None => return fail(key("tenant"), "must name the Entra tenant (its id or domain)".into()),
                    Some("common" | "organizations" | "consumers") => {
                        return fail(
                            key("tenant"),
                            "must be one tenant: with a multi-tenant endpoint the ID token's issuer cannot be checked"
                                .into(),
                        );
                    }
                    Some(t) if t.is_empty() || !t.bytes().all(|b| b.is_ascii_alphanumeric() || b".-".contains(&b)) => {
                        return fail(key("tenant"), format!("= {t:?} is not a tenant id or domain"));
                    }
                    Some(_) => {}
                }
            }
            match (p.kind(), p.issuer_url()) {
                (ProviderKind::Oidc, None) => {
                    return fail(key("issuer"), "must be set for an OpenID Connect provider".into());
                }
                (ProviderKind::Oidc, Some(issuer)) => {
                    let loopback = issuer.starts_with("http://127.0.0.1")
                        || issuer.starts_with("http://localhost")
                        || issuer.starts_with("http://[::1]");
                    let parsed = url::Url::parse(&issuer);
                    if parsed.is_err() || !(issuer.starts_with("https://") || loopback) {
                        return fail(
                            key("issuer"),
                            format!("= {issuer:?} must be an https:// URL (http:// only on loopback)"),
                        );
                    }
                }
                (ProviderKind::Github, Some(_)) => {
                    return fail(key("issuer"), "is not used by GitHub; remove it".into());
                }
                (ProviderKind::Github, None) => {}
            }
        }
        Ok(())
    }

    /// Reads each provider's secret from its variable (through `env`) or its file; the error is (key, problem),
    /// and never quotes the secret.
    pub fn read_secrets(&mut self, env: &dyn Fn(&str) -> Option<String>) -> Result<(), (String, String)> {
        for (i, p) in self.providers.iter_mut().enumerate() {
            if p.client_secret.is_some() {
                continue;
            }
            let secret = match (&p.client_secret_env, &p.client_secret_file) {
                (Some(var), None) => env(var).ok_or_else(|| {
                    (format!("oauth.providers[{i}].client_secret_env"), format!("= {var:?}: the variable is not set"))
                })?,
                (None, Some(file)) => read_secret_file(file).map_err(|problem| {
                    (format!("oauth.providers[{i}].client_secret_file"), format!("= {:?}: {problem}", file.display()))
                })?,
                // Left for validate() to name.
                _ => continue,
            };
            let secret = secret.trim().to_owned();
            if secret.is_empty() {
                return Err((format!("oauth.providers[{i}].client_secret_env"), "gives an empty secret".into()));
            }
            p.client_secret = Some(Secret(secret));
        }
        Ok(())
    }

    /// Makes secret files relative to `folder` (config.toml's).
    pub fn resolve_paths(&mut self, folder: &Path) {
        for p in &mut self.providers {
            if let Some(file) = &mut p.client_secret_file
                && file.is_relative()
            {
                *file = folder.join(&*file);
            }
        }
    }
}

fn read_secret_file(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot be read: {}", e.kind()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> OAuthConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn presets_imply_the_issuer_kind_and_scopes() {
        let c = parse(
            r#"
            [[providers]]
            id = "google"
            preset = "google"
            client_id = "x"
            client_secret_env = "G"
            [[providers]]
            id = "entra"
            preset = "microsoft"
            tenant = "contoso.onmicrosoft.com"
            client_id = "x"
            client_secret_file = "s"
            [[providers]]
            id = "gh"
            preset = "github"
            client_id = "x"
            client_secret_env = "H"
            "#,
        );
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.providers[0].issuer_url().as_deref(), Some("https://accounts.google.com"));
        assert_eq!(
            c.providers[1].issuer_url().as_deref(),
            Some("https://login.microsoftonline.com/contoso.onmicrosoft.com/v2.0")
        );
        assert_eq!(c.providers[2].kind(), ProviderKind::Github);
        assert_eq!(c.providers[2].scopes(), ["read:user", "user:email"]);
        assert_eq!(c.providers[0].scopes(), ["openid", "email", "profile"]);
    }

    #[test]
    fn accounts_of_unverified_addresses_are_off_unless_a_provider_says_so() {
        let base =
            "[[providers]]\nid = \"p\"\nissuer = \"https://a.example\"\nclient_id = \"x\"\nclient_secret_env = \"S\"\n";
        assert!(!parse(base).providers[0].allow_unverified_email_sign_up);
        let allowed = parse(&format!("{base}allow_unverified_email_sign_up = true\n"));
        assert!(allowed.providers[0].allow_unverified_email_sign_up);
        assert_eq!(allowed.validate(), Ok(()));
    }

    #[test]
    fn bad_providers_are_named_by_key() {
        let base = "[[providers]]\nid = \"p\"\nclient_id = \"x\"\nclient_secret_env = \"S\"\n";
        let cases = [
            ("", "oauth.providers[0].issuer"),
            ("issuer = \"http://idp.example.com\"\n", "oauth.providers[0].issuer"),
            ("preset = \"microsoft\"\ntenant = \"common\"\n", "oauth.providers[0].tenant"),
            ("preset = \"github\"\nkind = \"oidc\"\n", "oauth.providers[0].kind"),
        ];
        for (extra, key) in cases {
            let c = parse(&format!("{base}{extra}"));
            assert_eq!(c.validate().unwrap_err().0, key, "{extra}");
        }
        let twice = parse(&format!("{base}issuer = \"https://a.example\"\n{base}issuer = \"https://a.example\"\n"));
        assert_eq!(twice.validate().unwrap_err().0, "oauth.providers[1].id");
        let no_secret = parse("[[providers]]\nid = \"p\"\nclient_id = \"x\"\nissuer = \"https://a.example\"\n");
        assert_eq!(no_secret.validate().unwrap_err().0, "oauth.providers[0].client_secret_env");
    }

    #[test]
    fn secrets_come_from_the_environment_or_a_file_and_are_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("secret"), "from-file\n").unwrap();
        let mut c = parse(
            "[[providers]]\nid = \"a\"\nissuer = \"https://a.example\"\nclient_id = \"x\"\nclient_secret_env = \"A_SECRET\"\n\
             [[providers]]\nid = \"b\"\nissuer = \"https://b.example\"\nclient_id = \"x\"\nclient_secret_file = \"secret\"\n",
        );
        c.resolve_paths(dir.path());
        c.read_secrets(&|k| (k == "A_SECRET").then(|| "from-env".to_owned())).unwrap();
        assert_eq!(c.providers[0].client_secret.as_ref().unwrap().expose(), "from-env");
        assert_eq!(c.providers[1].client_secret.as_ref().unwrap().expose(), "from-file");
        let shown = format!("{c:?}");
        assert!(!shown.contains("from-env") && !shown.contains("from-file"), "{shown}");
        let mut missing = c.clone();
        missing.providers[0].client_secret = None;
        let (key, problem) = missing.read_secrets(&|_| None).unwrap_err();
        assert_eq!(key, "oauth.providers[0].client_secret_env");
        assert!(problem.contains("A_SECRET"), "{problem}");
    }
}
