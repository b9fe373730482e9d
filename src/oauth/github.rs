//! GitHub: plain OAuth 2 (no ID token), then its REST API for who signed in: `GET /user` for the id, name and
//! picture, `GET /user/emails` for the addresses and which of them GitHub has verified. Only the parsing lives
//! here, tested against answers recorded from api.github.com; the requests are in [`super::Provider`].

use serde::Deserialize;

use super::Identity;

pub const AUTHORIZE_URL: &str = "https://github.com/login/oauth/authorize";
pub const TOKEN_URL: &str = "https://github.com/login/oauth/access_token";
pub const USER_URL: &str = "https://api.github.com/user";
pub const EMAILS_URL: &str = "https://api.github.com/user/emails";

#[derive(Deserialize)]
struct User {
    id: u64,
    login: String,
    name: Option<String>,
    /// The public address, if the user chose one; not necessarily verified.
    email: Option<String>,
    avatar_url: Option<String>,
}

#[derive(Deserialize)]
struct Address {
    email: String,
    primary: bool,
    verified: bool,
}

/// Who signed in, from the bodies of `GET /user` and `GET /user/emails` (`None` when the token lacks the
/// `user:email` scope). The address is the primary one if verified, else the first verified one, else the public
/// one, unverified.
pub fn identity(user: &[u8], emails: Option<&[u8]>) -> Result<Identity, String> {
    let user: User = serde_json::from_slice(user).map_err(|e| format!("GitHub's user answer: {e}"))?;
    let addresses: Vec<Address> = match emails {
        Some(body) => serde_json::from_slice(body).map_err(|e| format!("GitHub's e-mail answer: {e}"))?,
        None => Vec::new(),
    };
    let verified = addresses.iter().find(|a| a.primary && a.verified).or_else(|| addresses.iter().find(|a| a.verified));
    let (email, email_verified) = match verified {
        Some(a) => (Some(a.email.clone()), true),
        None => (user.email.clone(), false),
    };
    Ok(Identity {
        subject: user.id.to_string(),
        email,
        email_verified,
        name: user.name.filter(|n| !n.trim().is_empty()).or(Some(user.login)),
        picture: user.avatar_url,
        amr: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `GET https://api.github.com/user` (trimmed of the URL fields), as GitHub answers it.
    const USER: &str = r#"{"login":"octocat","id":583231,"node_id":"MDQ6VXNlcjU4MzIzMQ==",
        "avatar_url":"https://avatars.githubusercontent.com/u/583231?v=4","gravatar_id":"","type":"User",
        "site_admin":false,"name":"The Octocat","company":"@github","blog":"https://github.blog",
        "location":"San Francisco","email":null,"hireable":null,"bio":null,"twitter_username":null,
        "public_repos":8,"public_gists":8,"followers":9000,"following":9,
        "created_at":"2011-01-25T18:44:36Z","updated_at":"2024-01-22T12:11:31Z"}"#;

    /// `GET https://api.github.com/user/emails`.
    const EMAILS: &str = r#"[
        {"email":"octocat@users.noreply.github.com","primary":false,"verified":true,"visibility":null},
        {"email":"octocat@github.com","primary":true,"verified":true,"visibility":"private"},
        {"email":"old@example.com","primary":false,"verified":false,"visibility":null}]"#;

    #[test]
    fn the_primary_verified_address_and_the_numeric_id() {
        let who = identity(USER.as_bytes(), Some(EMAILS.as_bytes())).unwrap();
        assert_eq!(who.subject, "583231");
        assert_eq!(who.email.as_deref(), Some("octocat@github.com"));
        assert!(who.email_verified);
        assert_eq!(who.name.as_deref(), Some("The Octocat"));
        assert_eq!(who.picture.as_deref(), Some("https://avatars.githubusercontent.com/u/583231?v=4"));
    }

    #[test]
    fn an_unverified_primary_is_passed_over_and_a_public_address_alone_is_not_verified() {
        let emails = r#"[{"email":"a@example.com","primary":true,"verified":false,"visibility":"public"},
                         {"email":"b@example.com","primary":false,"verified":true,"visibility":null}]"#;
        let who = identity(USER.as_bytes(), Some(emails.as_bytes())).unwrap();
        assert_eq!((who.email.as_deref(), who.email_verified), (Some("b@example.com"), true));
        let public = USER
            .replace(r#""email":null"#, r#""email":"public@example.com""#)
            .replace(r#""name":"The Octocat""#, r#""name":null"#);
        let who = identity(public.as_bytes(), None).unwrap();
        assert_eq!((who.email.as_deref(), who.email_verified), (Some("public@example.com"), false));
        assert_eq!(who.name.as_deref(), Some("octocat"), "the login when there is no name");
    }

    #[test]
    fn an_answer_of_another_shape_is_an_error() {
        assert!(identity(br#"{"message":"Bad credentials"}"#, None).is_err());
        assert!(identity(USER.as_bytes(), Some(br#"{"message":"Not Found"}"#)).is_err());
    }
}
