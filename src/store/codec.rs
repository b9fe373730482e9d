//! Framing of stored values: `[format version: u8][postcard bytes]`.
//!
//! The version byte lets a later release read old records after a format change (a `V2` struct beside `V1`),
//! instead of misreading them. Decoding never panics: bad bytes are [`StoreError::Corrupt`].

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::StoreError;
use super::records::{
    AuditRecordV1, InvitationRecordV1, MembershipRecordV1, OrgRecord, OrgRecordV1, OrgRecordV2, OutboxRecordV1,
    SessionRecord, SessionRecordV1, SessionRecordV2, SessionRecordV3, TokenRecord, TokenRecordV1, TokenRecordV2,
    TokenRecordV3, TokenRecordV4, UserRecord, UserRecordV1, UserRecordV2, UserRecordV3, UserRecordV4,
};

/// A persisted record type and the version byte its encoding carries.
pub trait Versioned: Serialize + DeserializeOwned {
    const VERSION: u8;
    /// What the record is, for error messages.
    const KIND: &'static str;
}

impl Versioned for UserRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "user";
}

impl Versioned for UserRecordV2 {
    const VERSION: u8 = 2;
    const KIND: &'static str = "user";
}

impl Versioned for UserRecordV3 {
    const VERSION: u8 = 3;
    const KIND: &'static str = "user";
}

impl Versioned for UserRecordV4 {
    const VERSION: u8 = 4;
    const KIND: &'static str = "user";
}

/// A user record in any format, as the current one: the first (no `email_verified`) reads as unverified, the
/// first two (no `ban_expires_ms`) with bans that last until lifted.
pub fn decode_user(bytes: &[u8]) -> Result<UserRecord, StoreError> {
    match bytes.first() {
        Some(&UserRecordV1::VERSION) => {
            decode::<UserRecordV1>(bytes).map(|r| UserRecordV3::from(UserRecordV2::from(r)).into())
        }
        Some(&UserRecordV2::VERSION) => decode::<UserRecordV2>(bytes).map(|r| UserRecordV3::from(r).into()),
        Some(&UserRecordV3::VERSION) => decode::<UserRecordV3>(bytes).map(Into::into),
        _ => decode::<UserRecordV4>(bytes),
    }
}

/// A session record in any format, as the current one: the first is never an impersonation, the first two have
/// no active organization.
pub fn decode_session(bytes: &[u8]) -> Result<SessionRecord, StoreError> {
    match bytes.first() {
        Some(&SessionRecordV1::VERSION) => decode::<SessionRecordV1>(bytes).map(|r| SessionRecordV2::from(r).into()),
        Some(&SessionRecordV2::VERSION) => decode::<SessionRecordV2>(bytes).map(Into::into),
        _ => decode::<SessionRecordV3>(bytes),
    }
}

/// An organization record in any format, as the current one: the first has no logo or metadata.
pub fn decode_org(bytes: &[u8]) -> Result<OrgRecord, StoreError> {
    match bytes.first() {
        Some(&OrgRecordV1::VERSION) => decode::<OrgRecordV1>(bytes).map(Into::into),
        _ => decode::<OrgRecordV2>(bytes),
    }
}

impl Versioned for OrgRecordV2 {
    const VERSION: u8 = 2;
    const KIND: &'static str = "organization";
}

impl Versioned for SessionRecordV3 {
    const VERSION: u8 = 3;
    const KIND: &'static str = "session";
}

impl Versioned for MembershipRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "membership";
}

impl Versioned for InvitationRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "invitation";
}

impl Versioned for OrgRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "organization";
}

impl Versioned for AuditRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "audit";
}

impl Versioned for SessionRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "session";
}

impl Versioned for SessionRecordV2 {
    const VERSION: u8 = 2;
    const KIND: &'static str = "session";
}

impl Versioned for TokenRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "token";
}

impl Versioned for TokenRecordV2 {
    const VERSION: u8 = 2;
    const KIND: &'static str = "token";
}

impl Versioned for TokenRecordV3 {
    const VERSION: u8 = 3;
    const KIND: &'static str = "token";
}

impl Versioned for TokenRecordV4 {
    const VERSION: u8 = 4;
    const KIND: &'static str = "token";
}

/// A token record in any format, as the current one: the first has no requester, the first three no code.
pub fn decode_token(bytes: &[u8]) -> Result<TokenRecord, StoreError> {
    let v3 = |r: TokenRecordV2| TokenRecordV3::from(r);
    match bytes.first() {
        Some(&TokenRecordV1::VERSION) => decode::<TokenRecordV1>(bytes).map(|r| v3(r.into()).into()),
        Some(&TokenRecordV2::VERSION) => decode::<TokenRecordV2>(bytes).map(|r| v3(r).into()),
        Some(&TokenRecordV3::VERSION) => decode::<TokenRecordV3>(bytes).map(Into::into),
        _ => decode::<TokenRecordV4>(bytes),
    }
}

impl Versioned for OutboxRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "outbox";
}

pub fn encode<R: Versioned>(record: &R) -> Vec<u8> {
    let mut bytes = vec![R::VERSION];
    // postcard cannot fail to serialise these plain structs into a growable buffer.
    bytes.extend(postcard::to_stdvec(record).unwrap_or_default());
    bytes
}

pub fn decode<R: Versioned>(bytes: &[u8]) -> Result<R, StoreError> {
    match bytes.split_first() {
        Some((&version, body)) if version == R::VERSION => postcard::from_bytes(body)
            .map_err(|e| StoreError::Corrupt(format!("{} record does not decode: {e}", R::KIND))),
        // A higher byte is most likely a record a newer release wrote (into a store whose schema it did not bump):
        // refused, never decoded as the old layout.
        Some((&version, _)) if version > R::VERSION => Err(StoreError::Corrupt(format!(
            "{} record has format version {version}, newer than this version of service-auth reads ({})",
            R::KIND,
            R::VERSION
        ))),
        Some((&version, _)) => {
            Err(StoreError::Corrupt(format!("{} record has unknown format version {version}", R::KIND)))
        }
        None => Err(StoreError::Corrupt(format!("{} record is empty", R::KIND))),
    }
}

#[cfg(test)]
mod tests {
    //! Golden bytes: if one of these fails, the on-disk format changed and existing data directories would be
    //! misread. Do not update the bytes; add a `…V2` record with a new version byte instead.
    use super::*;

    fn user() -> UserRecordV1 {
        UserRecordV1 {
            id: [1; 16],
            name: "Ann".into(),
            email: "a@b.co".into(),
            image: None,
            role: "user".into(),
            banned: true,
            ban_reason: Some("x".into()),
            organization_id: Some([2; 16]),
            password_hash: "$h".into(),
            created_at_ms: 1_795_338_902_123,
            updated_at_ms: 1,
        }
    }

    #[test]
    fn user_golden_bytes() {
        let mut expected = vec![1];
        expected.extend([1; 16]);
        expected.extend([3, b'A', b'n', b'n', 6, b'a', b'@', b'b', b'.', b'c', b'o', 0, 4, b'u', b's', b'e', b'r', 1]);
        expected.extend([1, 1, b'x', 1]);
        expected.extend([2; 16]);
        expected.extend([2, b'$', b'h', 0xd6, 0xe9, 0xcc, 0xa8, 0xc0, 0x68, 2]);
        assert_eq!(encode(&user()), expected);
        assert_eq!(decode::<UserRecordV1>(&expected).unwrap(), user());
    }

    #[test]
    fn user_v2_golden_bytes_and_v1_reads_as_unverified() {
        let v2 = UserRecordV2 { email_verified: true, ..user().into() };
        let mut expected = encode(&user());
        expected[0] = 2;
        expected.push(1);
        assert_eq!(encode(&v2), expected);
        assert_eq!(decode_user(&expected).unwrap(), UserRecordV3::from(v2.clone()).into());
        let old = decode_user(&encode(&user())).unwrap();
        assert_eq!(old, UserRecordV3::from(UserRecordV2 { email_verified: false, ..v2 }).into());
    }

    #[test]
    fn user_v3_golden_bytes_and_older_formats_read_without_expiry() {
        let v2 = UserRecordV2 { email_verified: true, ..user().into() };
        let v3 = UserRecordV3 { ban_expires_ms: Some(64), ..v2.clone().into() };
        let mut expected = encode(&v2);
        expected[0] = 3;
        expected.extend([1, 0x80, 0x01]);
        assert_eq!(encode(&v3), expected);
        assert_eq!(decode_user(&expected).unwrap(), v3.clone().into());
        assert_eq!(decode_user(&encode(&v2)).unwrap(), UserRecordV3 { ban_expires_ms: None, ..v3 }.into());
    }

    #[test]
    fn user_v4_golden_bytes_and_older_formats_read_without_a_second_factor() {
        let v3 =
            UserRecordV3 { ban_expires_ms: Some(64), ..UserRecordV2 { email_verified: true, ..user().into() }.into() };
        let two_factor = crate::store::records::TwoFactorRecordV1 {
            sealed_secret: vec![1, 9, 9],
            enabled: true,
            last_step: 300,
            backup_codes: vec![[5; 32]],
        };
        let v4 = UserRecordV4 { two_factor: Some(two_factor), ..v3.clone().into() };
        let mut expected = encode(&v3);
        expected[0] = 4;
        expected.extend([1, 3, 1, 9, 9, 1, 0xac, 0x02, 1]);
        expected.extend([5; 32]);
        assert_eq!(encode(&v4), expected);
        assert_eq!(decode_user(&expected).unwrap(), v4);
        assert_eq!(decode_user(&encode(&v3)).unwrap(), UserRecordV4 { two_factor: None, ..v4.clone() });
        let mut none = encode(&v3);
        none[0] = 4;
        none.push(0);
        assert_eq!(encode(&UserRecordV4 { two_factor: None, ..v4 }), none);
    }

    #[test]
    fn org_golden_bytes() {
        let org = OrgRecordV1 { id: [7; 16], name: "P".into(), slug: "p-1".into(), created_at_ms: -1 };
        let mut expected = vec![1];
        expected.extend([7; 16]);
        expected.extend([1, b'P', 3, b'p', b'-', b'1', 1]);
        assert_eq!(encode(&org), expected);
        assert_eq!(decode::<OrgRecordV1>(&expected).unwrap(), org);
    }

    #[test]
    fn org_v2_golden_bytes_and_v1_reads_without_logo() {
        let v1 = OrgRecordV1 { id: [7; 16], name: "P".into(), slug: "p-1".into(), created_at_ms: -1 };
        let v2 = OrgRecordV2 { logo: Some("L".into()), metadata: Some("{}".into()), ..v1.clone().into() };
        let mut expected = encode(&v1);
        expected[0] = 2;
        expected.extend([1, 1, b'L', 1, 2, b'{', b'}']);
        assert_eq!(encode(&v2), expected);
        assert_eq!(decode_org(&expected).unwrap(), v2);
        assert_eq!(decode_org(&encode(&v1)).unwrap(), OrgRecordV2 { logo: None, metadata: None, ..v2 });
    }

    #[test]
    fn membership_golden_bytes() {
        let m = MembershipRecordV1 { org: [1; 16], user: [2; 16], roles: 5, created_at_ms: 64 };
        let mut expected = vec![1];
        expected.extend([1; 16]);
        expected.extend([2; 16]);
        expected.extend([5, 0x80, 0x01]);
        assert_eq!(encode(&m), expected);
        assert_eq!(decode::<MembershipRecordV1>(&expected).unwrap(), m);
    }

    #[test]
    fn invitation_golden_bytes() {
        let i = InvitationRecordV1 {
            id: [1; 16],
            org: [2; 16],
            email: "a@b".into(),
            roles: 2,
            inviter: [3; 16],
            status: 1,
            expires_at_ms: 2,
            created_at_ms: 1,
        };
        let mut expected = vec![1];
        expected.extend([1; 16]);
        expected.extend([2; 16]);
        expected.extend([3, b'a', b'@', b'b', 2]);
        expected.extend([3; 16]);
        expected.extend([1, 4, 2]);
        assert_eq!(encode(&i), expected);
        assert_eq!(decode::<InvitationRecordV1>(&expected).unwrap(), i);
    }

    #[test]
    fn session_golden_bytes() {
        let session = SessionRecordV1 {
            id: [3; 16],
            user_id: [4; 16],
            expires_at_ms: 300,
            created_at_ms: 0,
            updated_at_ms: 64,
            ip_address: "::1".into(),
            user_agent: String::new(),
            remember_me: false,
        };
        let mut expected = vec![1];
        expected.extend([3; 16]);
        expected.extend([4; 16]);
        expected.extend([0xd8, 0x04, 0, 0x80, 0x01, 3, b':', b':', b'1', 0, 0]);
        assert_eq!(encode(&session), expected);
        assert_eq!(decode::<SessionRecordV1>(&expected).unwrap(), session);
        assert_eq!(decode_session(&expected).unwrap(), SessionRecordV3::from(SessionRecordV2::from(session.clone())));

        let v2 = SessionRecordV2 { impersonated_by: Some([5; 16]), ..session.into() };
        expected[0] = 2;
        expected.push(1);
        expected.extend([5; 16]);
        assert_eq!(encode(&v2), expected);
        assert_eq!(decode_session(&expected).unwrap(), SessionRecordV3::from(v2.clone()));

        let v3 = SessionRecordV3 { active_organization: Some([6; 16]), ..v2.into() };
        expected[0] = 3;
        expected.push(1);
        expected.extend([6; 16]);
        assert_eq!(encode(&v3), expected);
        assert_eq!(decode_session(&expected).unwrap(), v3);
    }

    #[test]
    fn audit_golden_bytes() {
        let entry = AuditRecordV1 {
            id: [5; 16],
            at_ms: 2,
            action: "a.b".into(),
            actor: Some([6; 16]),
            target: None,
            ip_address: "1".into(),
            detail: "d".into(),
        };
        let mut expected = vec![1];
        expected.extend([5; 16]);
        expected.extend([4, 3, b'a', b'.', b'b', 1]);
        expected.extend([6; 16]);
        expected.extend([0, 1, b'1', 1, b'd']);
        assert_eq!(encode(&entry), expected);
        assert_eq!(decode::<AuditRecordV1>(&expected).unwrap(), entry);
    }

    #[test]
    fn token_golden_bytes() {
        let token = TokenRecordV1 { kind: 1, user_id: [8; 16], created_at_ms: 1, expires_at_ms: 64 };
        let mut expected = vec![1, 1];
        expected.extend([8; 16]);
        expected.extend([2, 0x80, 0x01]);
        assert_eq!(encode(&token), expected);
        assert_eq!(decode::<TokenRecordV1>(&expected).unwrap(), token);
        let read = TokenRecordV3::from(TokenRecordV2::from(token));
        assert_eq!(decode_token(&expected).unwrap(), read.into(), "a V1 token has no requester");
    }

    #[test]
    fn token_v2_golden_bytes() {
        let token = TokenRecordV2 {
            kind: 1,
            user_id: [8; 16],
            created_at_ms: 1,
            expires_at_ms: 64,
            requested_by: Some([7; 16]),
        };
        let mut expected = vec![2, 1];
        expected.extend([8; 16]);
        expected.extend([2, 0x80, 0x01, 1]);
        expected.extend([7; 16]);
        assert_eq!(encode(&token), expected);
        assert_eq!(decode_token(&expected).unwrap(), TokenRecordV3::from(token).into());
    }

    #[test]
    fn token_v3_golden_bytes_and_older_tokens_have_no_failures() {
        let v2 = TokenRecordV2 { kind: 3, user_id: [8; 16], created_at_ms: 1, expires_at_ms: 64, requested_by: None };
        let v3 = TokenRecordV3 { failures: 4, ..v2.clone().into() };
        let mut expected = vec![3, 3];
        expected.extend([8; 16]);
        expected.extend([2, 0x80, 0x01, 0, 4]);
        assert_eq!(encode(&v3), expected);
        assert_eq!(decode_token(&expected).unwrap(), v3.clone().into());
        assert_eq!(decode_token(&encode(&v2)).unwrap(), TokenRecordV3 { failures: 0, ..v3 }.into());
    }

    #[test]
    fn token_v4_golden_bytes_and_older_tokens_have_no_code() {
        let v3 = TokenRecordV3 {
            kind: 6,
            user_id: [8; 16],
            created_at_ms: 1,
            expires_at_ms: 64,
            requested_by: None,
            failures: 2,
        };
        let v4 = TokenRecordV4 { code: Some([5; 32]), ..v3.clone().into() };
        let mut expected = vec![4, 6];
        expected.extend([8; 16]);
        expected.extend([2, 0x80, 0x01, 0, 2, 1]);
        expected.extend([5; 32]);
        assert_eq!(encode(&v4), expected);
        assert_eq!(decode_token(&expected).unwrap(), v4);
        assert_eq!(decode_token(&encode(&v3)).unwrap(), TokenRecordV4 { code: None, ..v4 });
    }

    #[test]
    fn outbox_golden_bytes() {
        let mail = OutboxRecordV1 {
            id: [9; 16],
            to: "a@b.co".into(),
            subject: "S".into(),
            text: "t".into(),
            html: "<p>".into(),
            created_at_ms: 3,
        };
        let mut expected = vec![1];
        expected.extend([9; 16]);
        expected.extend([6, b'a', b'@', b'b', b'.', b'c', b'o', 1, b'S', 1, b't', 3, b'<', b'p', b'>', 6]);
        assert_eq!(encode(&mail), expected);
        assert_eq!(decode::<OutboxRecordV1>(&expected).unwrap(), mail);
    }

    #[test]
    fn bad_bytes_are_corrupt_not_a_panic() {
        let bytes = encode(&user());
        assert!(matches!(decode::<UserRecordV1>(&[]), Err(StoreError::Corrupt(_))));
        assert!(matches!(decode::<UserRecordV1>(&[9]), Err(StoreError::Corrupt(_))));
        assert!(matches!(decode::<UserRecordV1>(&bytes[..bytes.len() - 3]), Err(StoreError::Corrupt(_))));
        let mut wrong_version = bytes.clone();
        wrong_version[0] = 2;
        assert!(matches!(decode::<UserRecordV1>(&wrong_version), Err(StoreError::Corrupt(_))));
    }
}

/// Fuzzing the codec (bounded, so it runs in every `cargo test`): arbitrary bytes never panic a decode, and every
/// record survives an encode/decode round trip.
#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;

    use super::*;

    fn id() -> impl Strategy<Value = [u8; 16]> {
        any::<[u8; 16]>()
    }

    fn user() -> impl Strategy<Value = UserRecordV1> {
        let text = ".{0,40}";
        (
            (id(), text, text, proptest::option::of(text), text, any::<bool>()),
            (proptest::option::of(text), proptest::option::of(id()), text, any::<i64>(), any::<i64>()),
        )
            .prop_map(|((id, name, email, image, role, banned), (ban_reason, org, hash, created, updated))| {
                UserRecordV1 {
                    id,
                    name,
                    email,
                    image,
                    role,
                    banned,
                    ban_reason,
                    organization_id: org,
                    password_hash: hash,
                    created_at_ms: created,
                    updated_at_ms: updated,
                }
            })
    }

    fn session() -> impl Strategy<Value = SessionRecordV1> {
        (id(), id(), any::<(i64, i64, i64)>(), ".{0,40}", ".{0,80}", any::<bool>()).prop_map(
            |(id, user_id, (expires, created, updated), ip_address, user_agent, remember_me)| SessionRecordV1 {
                id,
                user_id,
                expires_at_ms: expires,
                created_at_ms: created,
                updated_at_ms: updated,
                ip_address,
                user_agent,
                remember_me,
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn arbitrary_bytes_never_panic_a_decode(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode::<UserRecordV1>(&bytes);
            let _ = decode::<SessionRecordV1>(&bytes);
            let _ = decode::<OrgRecordV1>(&bytes);
            let _ = decode::<AuditRecordV1>(&bytes);
        }

        #[test]
        fn records_round_trip(u in user(), s in session()) {
            prop_assert_eq!(decode::<UserRecordV1>(&encode(&u)).unwrap(), u);
            prop_assert_eq!(decode::<SessionRecordV1>(&encode(&s)).unwrap(), s);
        }

        #[test]
        fn a_truncated_record_is_an_error_not_a_panic(u in user(), cut in 0usize..200) {
            let bytes = encode(&u);
            let cut = cut.min(bytes.len().saturating_sub(1));
            prop_assert!(decode::<UserRecordV1>(&bytes[..cut]).is_err());
        }
    }
}
