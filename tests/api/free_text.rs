//! Free text and URLs a person sets, through every call that takes them (issue 25, items 10 and 11).

use serde_json::{Value, json};

use super::harness::*;

/// The account as the admin plugin's `get-user` shows it (with its ban reason and picture).
async fn plugin_user(s: &TestServer, admin: &str, id: &str) -> Value {
    let r = s.get(&format!("/api/auth/admin/get-user?id={id}")).cookie(admin).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
}

async fn admin_call(s: &TestServer, path: &str, cookie: &str, body: &Value) -> Resp {
    s.post(&format!("/api/auth/admin/{path}")).cookie(cookie).json(body).send().await
}

/// Before: `"a\u202egnp.exe\u0007\u001b[31m"` was stored and shown as the ban reason, by `ban-user`, the admin
/// plugin's `update-user` and `PATCH /api/admin/users` alike. Now each refuses it (400), as names are refused,
/// and the account keeps the reason it had.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ban_reasons_refuse_control_and_bidirectional_characters() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let u = s.new_user("reason").await;
    for bad in ["a\u{202E}gnp.exe\u{7}\u{1b}[31m", "a\u{202E}gnp.exe", "bell\u{7}", "\u{1b}[31mred", "two\u{2028}lines"]
    {
        let r = admin_call(&s, "ban-user", &admin, &json!({"userId": u.id, "banReason": bad})).await;
        assert_auth_error(&r, 400, "VALIDATION_ERROR");
        assert!(r.text.contains("banReason"), "{}", r.text);
        let data = json!({"userId": u.id, "data": {"banned": true, "banReason": bad}});
        assert_auth_error(&admin_call(&s, "update-user", &admin, &data).await, 400, "VALIDATION_ERROR");
        let r = s.patch_user(&admin, &json!({"userId": u.id, "banned": true, "banReason": bad})).await;
        assert_eq!(r.status, 400, "PATCH with {bad:?}: {}", r.text);
    }
    let shown = plugin_user(&s, &admin, &u.id).await;
    assert_eq!((shown["banned"].clone(), shown["banReason"].clone()), (json!(false), Value::Null));

    // The same calls still take an ordinary reason, right-to-left script included, and the bound is unchanged.
    let r = admin_call(&s, "ban-user", &admin, &json!({"userId": u.id, "banReason": "  spam — «غير مرغوب»  "})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(plugin_user(&s, &admin, &u.id).await["banReason"], "spam — «غير مرغوب»");
    let long = json!({"userId": u.id, "banned": true, "banReason": "x".repeat(501)});
    assert_eq!(s.patch_user(&admin, &long).await.status, 400);
    s.patch_ok(&admin, &json!({"userId": u.id, "banned": true, "banReason": "x".repeat(500)})).await;
}

/// Before: `https://x.test/a.png?"><img/src=x/onerror=alert(4)>` was stored and served as sent. Now sign-up,
/// update-user (the caller's own and the administrator's) keep the parsed, normalised URL: quotes and angle
/// brackets percent-encoded, the host in lower case.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_urls_are_stored_normalised() {
    let s = TestServer::start().await;
    let raw = "https://X.test/a.png?\"><img/src=x/onerror=alert(4)>";
    let kept = "https://x.test/a.png?%22%3E%3Cimg/src=x/onerror=alert(4)%3E";
    let body = json!({"name": "N", "email": "img@example.com", "password": PASSWORD, "image": raw});
    let (status, body, cookie) = s.sign_up_body(&body).await.triple();
    assert_eq!((status, body["user"]["image"].clone()), (200, json!(kept)), "{body}");
    let (cookie, id) = (cookie.expect("a session"), str_of(&body["user"]["id"]).to_owned());
    assert_eq!(s.session(&cookie).await["user"]["image"], kept);

    let quoted = "https://x.test/it's/`tick`/<b>\"q\"#\"frag'<>";
    let r = s.post("/api/auth/update-user").cookie(&cookie).json(&json!({"image": quoted})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        s.session(&cookie).await["user"]["image"],
        "https://x.test/it%27s/%60tick%60/%3Cb%3E%22q%22#%22frag%27%3C%3E"
    );

    let admin = s.admin_session().await;
    let data = json!({"userId": id, "data": {"image": raw}});
    let r = admin_call(&s, "update-user", &admin, &data).await;
    assert_eq!((r.status, r.json()["image"].clone()), (200, json!(kept)), "{}", r.text);
    assert_eq!(plugin_user(&s, &admin, &id).await["image"], kept);
}
