//! The user list's total count and its export (`GET /api/admin/users/export`): the file holds exactly what the
//! list's pages hold, with the same filters, as CSV or JSON.

use serde_json::{Value, json};

use super::harness::*;

/// Every page of `GET /api/admin/users?{query}`, followed through `next_cursor`, and the `total` each page says.
async fn all_pages(s: &TestServer, admin: &str, query: &str) -> (Vec<Value>, Vec<u64>) {
    let (mut users, mut totals, mut cursor) = (Vec::new(), Vec::new(), None::<String>);
    loop {
        let after = cursor.as_ref().map(|c| format!("&cursor={c}")).unwrap_or_default();
        let r = s.get(&format!("/api/admin/users?limit=2&{query}{after}")).cookie(admin).send().await;
        assert_eq!(r.status, 200, "{}", r.text);
        let page = r.json();
        users.extend(page["users"].as_array().unwrap().iter().cloned());
        totals.push(page["total"].as_u64().unwrap());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return (users, totals),
        }
    }
}

/// A CSV file (RFC 4180, as the export writes it: quoted fields may hold commas, quotes and line breaks) as rows.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let (mut rows, mut row, mut field, mut quoted, mut chars) =
        (Vec::new(), Vec::new(), String::new(), false, text.chars().peekable());
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\r') => {}
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_export_holds_what_the_filtered_list_holds_as_csv_and_json() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let org = s.new_org(&admin, "Export Org", "export-org").await;
    let mut ids = Vec::new();
    for (i, name) in
        ["Plain Name", "Lind, \"Anna\"", "=HYPERLINK(\"http://x\")", "Multi Word", "Export Five"].iter().enumerate()
    {
        let email = format!("export{i}@example.com");
        let (status, body, _) = s.sign_up(name, &email, PASSWORD).await;
        assert_eq!(status, 200, "{body}");
        ids.push(str_of(&body["user"]["id"]).to_owned());
    }
    for id in &ids[1..4] {
        s.patch_ok(&admin, &json!({"userId": id, "organizationId": org["id"]})).await;
    }
    s.patch_ok(&admin, &json!({"userId": ids[2], "banned": true})).await;

    // Total on the list: every page says how many match in all.
    let (everyone, totals) = all_pages(&s, &admin, "").await;
    assert_eq!(everyone.len(), 6);
    assert!(totals.iter().all(|t| *t == 6), "{totals:?}");
    let filters = format!("organization_id={}&banned=false", str_of(&org["id"]));
    let (listed, totals) = all_pages(&s, &admin, &filters).await;
    assert_eq!(listed.len(), 2);
    assert!(totals.iter().all(|t| *t == 2), "{totals:?}");
    let (_, totals) = all_pages(&s, &admin, "q=export&match=prefix").await;
    assert_eq!(totals[0], 5);

    // JSON: the same users, the same fields, the same order.
    let r = s.get(&format!("/api/admin/users/export?format=json&{filters}")).cookie(&admin).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("content-type").as_deref(), Some("application/json"));
    assert_eq!(r.header("cache-control").as_deref(), Some("no-store"));
    assert!(r.header("content-disposition").unwrap().starts_with("attachment; filename=\"users-"));
    assert_eq!(r.json(), Value::Array(listed.clone()));
    let r = s.get("/api/admin/users/export?format=json").cookie(&admin).send().await;
    assert_eq!(r.json(), Value::Array(everyone.clone()));

    // CSV: a header, then one row per user with the list's seven fields; names that look like formulas defused.
    let r = s.get("/api/admin/users/export?format=csv").cookie(&admin).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("content-type").as_deref(), Some("text/csv; charset=utf-8"));
    let rows = parse_csv(&r.text);
    assert_eq!(rows[0], ["id", "name", "email", "role", "organization_id", "banned", "created_at"]);
    assert_eq!(rows.len(), everyone.len() + 1);
    for (row, user) in rows[1..].iter().zip(&everyone) {
        let name = str_of(&user["name"]);
        let shown = if name.starts_with('=') { format!("'{name}") } else { name.to_owned() };
        let org = user["organization_id"].as_str().unwrap_or("");
        let expected = [str_of(&user["id"]), &shown, str_of(&user["email"]), str_of(&user["role"]), org];
        assert_eq!(row[..5], expected, "{row:?}");
        assert_eq!(row[5], user["banned"].to_string());
        assert_eq!(row[6], str_of(&user["created_at"]));
    }
    assert!(r.text.contains("\"Lind, \"\"Anna\"\"\""), "{}", r.text);

    // Refusals: no format, a bad one, a window, an unknown filter, and anyone but an administrator.
    for (query, status) in [("", 400), ("format=xml", 400), ("format=csv&limit=5", 400), ("format=csv&colour=red", 400)]
    {
        let r = s.get(&format!("/api/admin/users/export?{query}")).cookie(&admin).send().await;
        assert_eq!(r.status, status, "{query}: {}", r.text);
    }
    let user = s.new_user("not-admin").await;
    assert_eq!(s.get("/api/admin/users/export?format=csv").cookie(&user.cookie).send().await.status, 403);
    assert_eq!(s.get("/api/admin/users/export?format=csv").send().await.status, 401);
}

/// An export of several chunks arrives whole (it is written while it is sent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_export_is_streamed_whole() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    for i in 0..150 {
        let r = s
            .post("/api/auth/admin/create-user")
            .cookie(&admin)
            .json(&json!({"email": format!("bulk{i}@example.com"), "name": format!("Bulk {i}")}))
            .send()
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    let r = s.get("/api/admin/users/export?format=json&q=bulk&match=prefix").cookie(&admin).send().await;
    assert_eq!(r.header("content-length"), None, "streamed, not sent whole");
    let users = r.json();
    assert_eq!(users.as_array().unwrap().len(), 150);
    let r = s.get("/api/admin/users/export?format=csv&q=bulk&match=prefix").cookie(&admin).send().await;
    assert_eq!(r.text.lines().count(), 151);
}
