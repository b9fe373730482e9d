//! The check of a new password (length, the shipped list of breached and common passwords, context words), as
//! sign-up, change, reset and an administrator's set run it before hashing. The budget is 50 µs.
//! `cargo bench --bench password_policy`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use service_auth::domain::{Password, PasswordContext, PasswordPolicy, is_listed};

fn policy(c: &mut Criterion) {
    let policy = PasswordPolicy::new(15, 8, &["Acme Pharmacy"]);
    let context = PasswordContext { email: "margaret.oduya@example.com", name: "Margaret Oduya", second_factor: false };
    // Accepted: the whole check runs (the list misses, every context word is looked for).
    let good = Password::new("tea at four, every day 1974").unwrap();
    // Refused by the list: the most common case of a refusal.
    let listed = Password::new("1qaz2wsx3edc4rfv").unwrap();
    // The longest password there is: the list lookup walks it all.
    let longest = Password::new(&"xq7".repeat(42)).unwrap();
    assert!(policy.check(&good, context).is_ok());
    assert!(policy.check(&listed, context).is_err());

    c.bench_function("password_policy/accepted", |b| b.iter(|| policy.check(black_box(&good), black_box(context))));
    c.bench_function("password_policy/listed", |b| b.iter(|| policy.check(black_box(&listed), black_box(context))));
    c.bench_function("password_policy/128_chars", |b| b.iter(|| policy.check(black_box(&longest), black_box(context))));
    c.bench_function("password_list/lookup", |b| b.iter(|| is_listed(black_box(&good))));
}

criterion_group!(benches, policy);
criterion_main!(benches);
