//! What a new password must be (NIST SP 800-63B-4 §3.1.1.2, ASVS 6.2.4, 6.2.11, 6.2.12), wherever one is chosen:
//! sign-up, change-password, reset-password, an administrator's create-user and set-user-password. And the
//! optional range lookup, against a stub of the Have I Been Pwned range API that records what it was sent.

use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::harness::*;

/// On the shipped list (each at least 15 characters, so only the list can refuse them).
const LISTED: &[&str] = &["1qaz2wsx3edc4rfv", "passwordpassword", "qwerty123456789", "PasswordPassword"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_up_refuses_short_listed_and_context_passwords_with_codes_naming_why() {
    let s = TestServer::start().await;
    let sign_up = |name: &str, email: &str, password: &str| {
        s.post("/api/auth/sign-up/email").json(&json!({"name": name, "email": email, "password": password})).send()
    };
    // 8 to 14 characters: above the hard floor of 8, below the default minimum of a password-only account.
    let r = sign_up("Short", "short@example.com", "xkq7 vbn3 zmw9").await;
    assert_auth_error(&r, 400, "PASSWORD_TOO_SHORT");
    assert_auth_error(&sign_up("Short", "short@example.com", "xkq7").await, 400, "PASSWORD_TOO_SHORT");
    for listed in LISTED {
        assert_auth_error(&sign_up("Listed", "listed@example.com", listed).await, 400, "PASSWORD_COMPROMISED");
    }
    for (name, email, password) in [
        ("Margaret Oduya", "m.o@example.com", "margaret likes tea"),
        ("M O", "margaret.oduya@example.com", "xx margaret.oduya xx"),
        ("M O", "margaret.oduya@example.com", "ODUYA 1974 tea time"),
        ("M O", "mo@example.com", "my service-auth pass"),
    ] {
        assert_auth_error(&sign_up(name, email, password).await, 400, "PASSWORD_CONTAINS_CONTEXT_WORD");
    }
    // None of the refusals made an account: the same address signs up with a good password.
    for email in ["short@example.com", "listed@example.com", "m.o@example.com"] {
        let (status, body, _) = s.sign_up("Margaret Oduya", email, "tea at four, 1974!").await;
        assert_eq!(status, 200, "{body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_password_refuses_a_listed_or_context_password_and_keeps_the_old_one() {
    let s = TestServer::start().await;
    let u = s.new_user("grace").await;
    let change = |new: &str| {
        s.post("/api/auth/change-password")
            .cookie(&u.cookie)
            .json(&json!({"currentPassword": PASSWORD, "newPassword": new}))
            .send()
    };
    assert_auth_error(&change(LISTED[0]).await, 400, "PASSWORD_COMPROMISED");
    assert_auth_error(&change("grace under fire 9").await, 400, "PASSWORD_CONTAINS_CONTEXT_WORD");
    assert_auth_error(&change("fourteen chars").await, 400, "PASSWORD_TOO_SHORT");
    // A wrong current password is answered as such first: the policy's verdict is for the account's owner.
    let wrong = json!({"currentPassword": "not my password", "newPassword": LISTED[0]});
    let r = s.post("/api/auth/change-password").cookie(&u.cookie).json(&wrong).send().await;
    assert_auth_error(&r, 400, "INVALID_PASSWORD");
    assert_eq!(s.sign_in(&u.email, PASSWORD).await.0, 200, "the old password still works");
    assert_eq!(change("a sound new passphrase").await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_administrator_cannot_set_or_create_a_listed_password() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let u = s.new_user("henry").await;
    let set = |password: &str| {
        s.post("/api/auth/admin/set-user-password")
            .cookie(&admin)
            .json(&json!({"userId": u.id, "newPassword": password}))
            .send()
    };
    assert_auth_error(&set(LISTED[1]).await, 400, "PASSWORD_COMPROMISED");
    assert_auth_error(&set("henry's new password").await, 400, "PASSWORD_CONTAINS_CONTEXT_WORD");
    assert_auth_error(&set("too short pw").await, 400, "PASSWORD_TOO_SHORT");
    assert_eq!(s.sign_in(&u.email, PASSWORD).await.0, 200, "unchanged");
    assert_eq!(set("chosen by the admin").await.status, 200);

    let create = |password: &str| {
        let body = json!({"name": "Ida Lowe", "email": "ida@example.com", "password": password});
        s.post("/api/auth/admin/create-user").cookie(&admin).json(&body).send()
    };
    assert_auth_error(&create(LISTED[2]).await, 400, "PASSWORD_COMPROMISED");
    assert_auth_error(&create("lowe and behold!").await, 400, "PASSWORD_CONTAINS_CONTEXT_WORD");
    let r = create("chosen by the admin").await;
    assert_eq!(r.status, 200, "{}", r.text);
}

/// The token of the newest reset link in `dir`.
async fn reset_token(dir: &std::path::Path) -> String {
    for _ in 0..500 {
        let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.retain(|p| p.extension().is_some_and(|e| e == "eml"));
        if let Some(file) = files.first() {
            let text = std::fs::read_to_string(file).unwrap().replace("=\r\n", "").replace("=\n", "");
            let at = text.find("/api/auth/reset-password/").expect("a reset link") + "/api/auth/reset-password/".len();
            return text[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect();
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("no reset mail");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_password_refuses_a_listed_password_and_the_link_still_works() {
    let mail = tempfile::tempdir().unwrap();
    let dir = mail.path().to_owned();
    let s = TestServer::start_adjusted(|c| c.email.directory = Some(dir)).await;
    let u = s.new_user("iris").await;
    let r = s.post("/api/auth/request-password-reset").json(&json!({"email": u.email})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let token = reset_token(mail.path()).await;
    let reset = |password: &str| {
        s.post("/api/auth/reset-password").json(&json!({"token": token, "newPassword": password})).send()
    };
    assert_auth_error(&reset(LISTED[3]).await, 400, "PASSWORD_COMPROMISED");
    assert_auth_error(&reset("iris in the garden").await, 400, "PASSWORD_CONTAINS_CONTEXT_WORD");
    assert_auth_error(&reset("short but 8+").await, 400, "PASSWORD_TOO_SHORT");
    // A refusal does not spend the link.
    assert_eq!(reset("a garden of tulips").await.status, 200);
    assert_eq!(s.sign_in(&u.email, "a garden of tulips").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_minimum_length_is_configurable() {
    let s = TestServer::start_adjusted(|c| c.passwords.min_length = 10).await;
    let (status, body, _) = s.sign_up("Jo", "jo@example.com", "ten chars!").await;
    assert_eq!(status, 200, "{body}");
    let r = s.sign_up_body(&json!({"name": "Jo", "email": "jo2@example.com", "password": "nine char"})).await;
    assert_auth_error(&r, 400, "PASSWORD_TOO_SHORT");
}

/// A stub of the range API on loopback: answers every request with `body` (or closes at once when `None`) and
/// keeps each request's bytes as they arrived.
async fn range_stub(body: Option<String>) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/range/", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match socket.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            record.lock().unwrap().push(String::from_utf8_lossy(&request).into_owned());
            if let Some(body) = &body {
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            }
        }
    });
    (url, seen)
}

fn sha1_hex(text: &str) -> String {
    use sha1::Digest;
    hex::encode_upper(sha1::Sha1::digest(text.as_bytes()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_range_lookup_sends_only_a_five_digit_prefix_and_refuses_a_listed_password() {
    let breached = "an unlisted but breached phrase";
    let digest = sha1_hex(breached);
    // The breached password's suffix, between two padding lines of count 0.
    let body = format!("{}:0\r\n{}:42\r\n{}:0", "0".repeat(35), &digest[5..], "F".repeat(35));
    let (url, seen) = range_stub(Some(body)).await;
    let s = TestServer::start_adjusted(|c| c.passwords.range_url = Some(url)).await;

    let r = s.sign_up_body(&json!({"name": "Kim", "email": "kim@example.com", "password": breached})).await;
    assert_auth_error(&r, 400, "PASSWORD_COMPROMISED");
    let fine = "a phrase nobody has used";
    let (status, body, _) = s.sign_up("Kim", "kim@example.com", fine).await;
    assert_eq!(status, 200, "{body}");

    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 2, "{requests:?}");
    for (request, password) in requests.iter().zip([breached, fine]) {
        let digest = sha1_hex(password);
        let first = request.lines().next().unwrap();
        assert_eq!(first, format!("GET /range/{} HTTP/1.1", &digest[..5]), "{request}");
        // Nothing else of the password: not its suffix, not the password, no body.
        assert!(!request.to_uppercase().contains(&digest[5..]), "{request}");
        assert!(!request.contains(password), "{request}");
        assert!(request.ends_with("\r\n\r\n"), "no body: {request:?}");
        assert!(request.to_lowercase().contains("add-padding: true"), "{request}");
    }
    // The shipped list is checked first: a listed password never reaches the lookup.
    let r = s.sign_up_body(&json!({"name": "Kim", "email": "kim2@example.com", "password": LISTED[0]})).await;
    assert_auth_error(&r, 400, "PASSWORD_COMPROMISED");
    assert_eq!(seen.lock().unwrap().len(), 2);
}

/// Fail-open: a lookup that gets no answer lets a password the shipped list accepts through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_range_lookup_lets_the_password_through() {
    let (url, seen) = range_stub(None).await;
    let s = TestServer::start_adjusted(|c| c.passwords.range_url = Some(url)).await;
    let (status, body, _) = s.sign_up("Lee", "lee@example.com", "the lookup is down today").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(seen.lock().unwrap().len(), 1, "it was asked");
    let r = s.sign_up_body(&json!({"name": "Lee", "email": "lee2@example.com", "password": LISTED[1]})).await;
    assert_auth_error(&r, 400, "PASSWORD_COMPROMISED");
}
