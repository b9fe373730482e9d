//! What docs/reference.md promises about an answer's shape, checked against the answer.

use serde_json::json;

use super::harness::*;

/// Before: the reference promised `"url": null` on a sign-in without `callbackURL`; the server (like better-auth
/// 1.7.25, whose `url` is the absent `callbackURL`, dropped by JSON) sends no `url` key at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_describes_a_sign_in_without_callback_as_answered() {
    let reference = include_str!("../../docs/reference.md");
    let section = &reference[reference.find("### `POST /api/auth/sign-in/email`").expect("the sign-in section")..];
    let row = section.lines().find(|l| l.starts_with("| 200 |")).expect("its 200 row");
    assert!(!row.contains(r#""url": null"#), "{row}");
    assert!(row.starts_with(r#"| 200 | `{"redirect": false, "token", "user": User}`"#), "{row}");

    let s = TestServer::start().await;
    let u = s.new_user("plain").await;
    let body = s.sign_in_body(&json!({"email": u.email, "password": PASSWORD})).await.json();
    let mut keys: Vec<&str> = body.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["redirect", "token", "user"]);
    assert_eq!(body["redirect"], false);
}
