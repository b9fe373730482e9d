//! Framing of stored values: `[format version: u8][postcard bytes]`.
//!
//! The version byte lets a later release read old records after a format change (a `V2` struct beside `V1`),
//! instead of misreading them. Decoding never panics: bad bytes are [`StoreError::Corrupt`].
//!
//! # Rolling upgrades: a record of a newer format
//!
//! Nodes of two releases share one PostgreSQL database while a cluster is upgraded one node at a time, so a node
//! meets records a newer release wrote (in the change log, in a read-back, or at start). What it does depends on
//! what a copy it cannot read would mean:
//!
//! - **Skipped**: one-time tokens (reset and verification links, second-factor challenges, trusted devices, mailed
//!   codes) and sessions. A node that cannot read one holds none ([`read_token`], [`read_session`]): any older
//!   copy it held is dropped, the record stays in the database for the newer nodes, a warning is logged and
//!   `service_auth_store_newer_records_skipped_total` counts it. The worst that follows is a refusal on this
//!   node (a link, a code or a session that works on the upgraded nodes answers as unknown here until this node
//!   is upgraded too); never a right the newer record took away, since the older copy is not kept.
//! - **Refused**: accounts, organizations, memberships, invitations, linked identities, and every other kind. An
//!   older copy of these could grant what the newer one took away (a ban, a role, a membership), and dropping
//!   them would break the rules this node checks (the last administrator, an organization's owners). At start
//!   the node refuses to serve with a message naming the record and the versions; a running node's follower
//!   stops there, so the node turns not ready and then refuses session checks (`max_staleness_secs`): upgrade it.
//!
//! So that a node one release older can always do this, a release writes only formats the release before it
//! reads (`this_release_writes_what_the_previous_one_reads`): a new format is first shipped read-only, then
//! written by the release after; and every session format keeps its `id` and `user_id` first
//! ([`session_user`]), which is how an older node finds the copy to drop.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::StoreError;
use super::records::{
    AuditRecordV1, InvitationRecord, InvitationRecordV1, InvitationRecordV2, MembershipRecord, MembershipRecordV1,
    MembershipRecordV2, OrgRecord, OrgRecordV1, OrgRecordV2, OrgRecordV3, OrgRecordV4, OrgRecordV5, OutboxRecordV1,
    SessionRecord, SessionRecordV1, SessionRecordV2, SessionRecordV3, SessionRecordV4, TokenRecord, TokenRecordV1,
    TokenRecordV2, TokenRecordV3, TokenRecordV4, TokenRecordV5, UserRecord, UserRecordV1, UserRecordV2, UserRecordV3,
    UserRecordV4, UserRecordV5,
};
#[cfg(test)]
use super::records::{OrgRoleRecordV1, TeamMemberRecordV1, TeamRecordV1};

/// A persisted record type and the version byte its encoding carries.
pub trait Versioned: Serialize + DeserializeOwned {
    const VERSION: u8;
    /// What the record is, for error messages.
    const KIND: &'static str;

    /// The bytes written: this format's, unless a format needed by few records writes the others in the older
    /// one ([`UserRecordV5`]).
    fn framed(&self) -> Vec<u8> {
        let mut bytes = vec![Self::VERSION];
        // postcard cannot fail to serialise these plain structs into a growable buffer.
        bytes.extend(postcard::to_stdvec(self).unwrap_or_default());
        bytes
    }
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

impl Versioned for UserRecordV5 {
    const VERSION: u8 = 5;
    const KIND: &'static str = "user";

    /// An account without a username is written in the fourth format, which the previous release reads: the
    /// fifth is the fourth's fields then two options, so those bytes are the fifth's without its two trailing
    /// `None`s (a golden test holds it). Only an account with a username needs every node upgraded.
    fn framed(&self) -> Vec<u8> {
        let mut bytes = vec![Self::VERSION];
        bytes.extend(postcard::to_stdvec(self).unwrap_or_default());
        if self.username.is_none() && self.display_username.is_none() {
            bytes.truncate(bytes.len() - 2);
            bytes[0] = UserRecordV4::VERSION;
        }
        bytes
    }
}

/// A user record in any format, as the current one: the first (no `email_verified`) reads as unverified, the
/// first two (no `ban_expires_ms`) with bans that last until lifted.
pub fn decode_user(bytes: &[u8]) -> Result<UserRecord, StoreError> {
    match bytes.first() {
        Some(&UserRecordV1::VERSION) => {
            decode::<UserRecordV1>(bytes).map(|r| UserRecordV4::from(UserRecordV3::from(UserRecordV2::from(r))).into())
        }
        Some(&UserRecordV2::VERSION) => {
            decode::<UserRecordV2>(bytes).map(|r| UserRecordV4::from(UserRecordV3::from(r)).into())
        }
        Some(&UserRecordV3::VERSION) => decode::<UserRecordV3>(bytes).map(|r| UserRecordV4::from(r).into()),
        Some(&UserRecordV4::VERSION) => decode::<UserRecordV4>(bytes).map(Into::into),
        _ => decode::<UserRecordV5>(bytes),
    }
}

/// A session record in any format, as the current one: the first is never an impersonation, the first two have
/// no active organization, the first three no active team.
pub fn decode_session(bytes: &[u8]) -> Result<SessionRecord, StoreError> {
    match bytes.first() {
        Some(&SessionRecordV1::VERSION) => decode::<SessionRecordV1>(bytes).map(|r| SessionRecordV2::from(r).into()),
        Some(&SessionRecordV2::VERSION) => decode::<SessionRecordV2>(bytes).map(Into::into),
        Some(&SessionRecordV3::VERSION) => decode::<SessionRecordV3>(bytes).map(Into::into),
        _ => decode::<SessionRecordV4>(bytes),
    }
}

/// An organization record in any format, as the current one: the first has no logo or metadata.
pub fn decode_org(bytes: &[u8]) -> Result<OrgRecord, StoreError> {
    match bytes.first() {
        Some(&OrgRecordV1::VERSION) => decode::<OrgRecordV1>(bytes).map(Into::into),
        Some(&OrgRecordV2::VERSION) => decode::<OrgRecordV2>(bytes).map(Into::into),
        Some(&OrgRecordV3::VERSION) => decode::<OrgRecordV3>(bytes).map(Into::into),
        Some(&OrgRecordV4::VERSION) => decode::<OrgRecordV4>(bytes).map(Into::into),
        _ => decode::<OrgRecordV5>(bytes),
    }
}

/// An invitation record in either format, as the current one: the first names no team.
pub fn decode_invitation(bytes: &[u8]) -> Result<InvitationRecord, StoreError> {
    match bytes.first() {
        Some(&InvitationRecordV1::VERSION) => decode::<InvitationRecordV1>(bytes).map(Into::into),
        _ => decode::<InvitationRecordV2>(bytes),
    }
}

/// A membership record in either format, as the current one: the first holds no custom role.
pub fn decode_member(bytes: &[u8]) -> Result<MembershipRecord, StoreError> {
    match bytes.first() {
        Some(&MembershipRecordV1::VERSION) => decode::<MembershipRecordV1>(bytes).map(Into::into),
        _ => decode::<MembershipRecordV2>(bytes),
    }
}

/// An organization record's bytes: the second format for one without teams (what the previous release reads),
/// the third only for one with teams, which an older node refuses (teams are off by default; docs/cluster.md
/// says to upgrade every node before turning them on).
pub fn encode_org(record: &OrgRecord) -> Vec<u8> {
    // The fifth only for an organization that requires single sign-on (an owner's choice: docs/cluster.md says to
    // upgrade every node before turning it on).
    let Some(v4) = record.as_v4() else { return encode(record) };
    match v4.as_v3() {
        Some(v3) => match v3.as_v2() {
            Some(v2) => encode(&v2),
            None => encode(&v3),
        },
        // The fourth only for an organization with roles of its own (`dynamic_roles`, off by default: the same
        // rule as teams, every node upgraded first).
        None => encode(&v4),
    }
}

impl Versioned for OrgRecordV5 {
    const VERSION: u8 = 5;
    const KIND: &'static str = "organization";
}

impl Versioned for OrgRecordV4 {
    const VERSION: u8 = 4;
    const KIND: &'static str = "organization";
}

impl Versioned for MembershipRecordV2 {
    const VERSION: u8 = 2;
    const KIND: &'static str = "membership";

    /// A membership without a custom role is written in the first format, which the previous release reads: the
    /// second is the first's fields then one list, so those bytes are the second's without the empty list's one
    /// byte (a golden test holds it). Only a member given an organization's own role needs every node upgraded.
    fn framed(&self) -> Vec<u8> {
        let mut bytes = vec![Self::VERSION];
        bytes.extend(postcard::to_stdvec(self).unwrap_or_default());
        if self.custom.is_empty() {
            bytes.truncate(bytes.len() - 1);
            bytes[0] = MembershipRecordV1::VERSION;
        }
        bytes
    }
}

impl Versioned for OrgRecordV3 {
    const VERSION: u8 = 3;
    const KIND: &'static str = "organization";
}

impl Versioned for OrgRecordV2 {
    const VERSION: u8 = 2;
    const KIND: &'static str = "organization";
}

impl Versioned for SessionRecordV3 {
    const VERSION: u8 = 3;
    const KIND: &'static str = "session";
}

impl Versioned for SessionRecordV4 {
    const VERSION: u8 = 4;
    const KIND: &'static str = "session";

    /// A session without an active team is written in the third format, which the previous release reads: the
    /// fourth is the third's fields then one option, so those bytes are the fourth's without its trailing `None`
    /// (a golden test holds it). Only a session working in a team needs every node upgraded.
    fn framed(&self) -> Vec<u8> {
        let mut bytes = vec![Self::VERSION];
        bytes.extend(postcard::to_stdvec(self).unwrap_or_default());
        if self.active_team.is_none() {
            bytes.truncate(bytes.len() - 1);
            bytes[0] = SessionRecordV3::VERSION;
        }
        bytes
    }
}

impl Versioned for MembershipRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "membership";
}

impl Versioned for InvitationRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "invitation";
}

impl Versioned for InvitationRecordV2 {
    const VERSION: u8 = 2;
    const KIND: &'static str = "invitation";

    /// An invitation into no team is written in the first format, which the previous release reads: the second is
    /// the first's fields then one list, so those bytes are the second's without the empty list's one byte (a
    /// golden test holds it). Only an invitation naming a team needs every node upgraded.
    fn framed(&self) -> Vec<u8> {
        let mut bytes = vec![Self::VERSION];
        bytes.extend(postcard::to_stdvec(self).unwrap_or_default());
        if self.teams.is_empty() {
            bytes.truncate(bytes.len() - 1);
            bytes[0] = InvitationRecordV1::VERSION;
        }
        bytes
    }
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

impl Versioned for TokenRecordV5 {
    const VERSION: u8 = 5;
    const KIND: &'static str = "token";
}

/// A token record in any format, as the current one: the first has no requester, the first three no code, the
/// first four no address.
pub fn decode_token(bytes: &[u8]) -> Result<TokenRecord, StoreError> {
    let v4 = |r: TokenRecordV3| TokenRecordV4::from(r);
    match bytes.first() {
        Some(&TokenRecordV1::VERSION) => {
            decode::<TokenRecordV1>(bytes).map(|r| v4(TokenRecordV2::from(r).into()).into())
        }
        Some(&TokenRecordV2::VERSION) => decode::<TokenRecordV2>(bytes).map(|r| v4(r.into()).into()),
        Some(&TokenRecordV3::VERSION) => decode::<TokenRecordV3>(bytes).map(|r| v4(r).into()),
        Some(&TokenRecordV4::VERSION) => decode::<TokenRecordV4>(bytes).map(Into::into),
        _ => decode::<TokenRecordV5>(bytes),
    }
}

/// A token record's bytes: the fourth format for every kind the previous release knows (so it keeps reading the
/// links, challenges and codes this one writes), the fifth only for the kinds it does not (sign-in links and
/// mailed codes of `emailOTP`), which it skips as the rolling-upgrade rule says rather than read them as corrupt.
pub fn encode_token(record: &TokenRecord) -> Vec<u8> {
    match record.as_v4() {
        Some(v4) => encode(&v4),
        None => encode(record),
    }
}

impl Versioned for OutboxRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "outbox";
}

/// Records of a newer format skipped by this process (see the module's rule), for the metrics scrape. Per process:
/// production runs one server per process.
static NEWER_SKIPPED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many records of a newer format this process has skipped (loaded or followed) since it started.
pub fn newer_records_skipped() -> u64 {
    NEWER_SKIPPED.load(std::sync::atomic::Ordering::Relaxed)
}

/// The version byte of `bytes` when it is above `known`, the newest this release reads.
fn newer(bytes: &[u8], known: u8) -> Option<u8> {
    bytes.first().copied().filter(|&v| v > known)
}

fn skipped(kind: &str, version: u8, known: u8) {
    NEWER_SKIPPED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    tracing::warn!(
        kind,
        version,
        reads = known,
        "a {kind} record of a newer format (a node of a newer release wrote it): not held on this node, left in the \
         store for the newer nodes; upgrade this node"
    );
}

/// A token record, or `None` when a newer release wrote it in a format this one does not read: skipped, never
/// held (the rolling-upgrade rule in the module's documentation).
pub fn read_token(bytes: &[u8]) -> Result<Option<TokenRecord>, StoreError> {
    if let Some(version) = newer(bytes, TokenRecordV5::VERSION) {
        skipped("token", version, TokenRecordV5::VERSION);
        return Ok(None);
    }
    decode_token(bytes).map(Some)
}

/// A session record, or `None` when a newer release wrote it in a format this one does not read (see
/// [`read_token`]); [`session_user`] then names whose session to drop.
pub fn read_session(bytes: &[u8]) -> Result<Option<SessionRecord>, StoreError> {
    if let Some(version) = newer(bytes, SessionRecordV4::VERSION) {
        skipped("session", version, SessionRecordV4::VERSION);
        return Ok(None);
    }
    decode_session(bytes).map(Some)
}

/// The account a session record of any format belongs to: every format starts with the session's `id` and then
/// `user_id`, 16 bytes each as postcard writes a byte array (pinned by `a_session_of_any_format_names_its_user`).
pub fn session_user(bytes: &[u8]) -> Result<[u8; 16], StoreError> {
    bytes
        .get(17..33)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| StoreError::Corrupt("session record is too short to name its account".into()))
}

pub fn encode<R: Versioned>(record: &R) -> Vec<u8> {
    record.framed()
}

pub fn decode<R: Versioned>(bytes: &[u8]) -> Result<R, StoreError> {
    match bytes.split_first() {
        Some((&version, body)) if version == R::VERSION => postcard::from_bytes(body)
            .map_err(|e| StoreError::Corrupt(format!("{} record does not decode: {e}", R::KIND))),
        // A higher byte is a record a newer release wrote (into a store whose schema it did not bump): refused,
        // never decoded as the old layout (what may be skipped instead is [`read_token`]'s and [`read_session`]'s).
        Some((&version, _)) if version > R::VERSION => Err(StoreError::Corrupt(format!(
            "{} record has format version {version}, newer than this version of service-auth reads ({}): a node of \
             a newer release wrote it; upgrade this node (docs/cluster.md, \"Rolling upgrades\")",
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
        assert_eq!(decode_user(&expected).unwrap(), UserRecordV4::from(UserRecordV3::from(v2.clone())).into());
        let old = decode_user(&encode(&user())).unwrap();
        assert_eq!(old, UserRecordV4::from(UserRecordV3::from(UserRecordV2 { email_verified: false, ..v2 })).into());
    }

    #[test]
    fn user_v3_golden_bytes_and_older_formats_read_without_expiry() {
        let v2 = UserRecordV2 { email_verified: true, ..user().into() };
        let v3 = UserRecordV3 { ban_expires_ms: Some(64), ..v2.clone().into() };
        let mut expected = encode(&v2);
        expected[0] = 3;
        expected.extend([1, 0x80, 0x01]);
        assert_eq!(encode(&v3), expected);
        assert_eq!(decode_user(&expected).unwrap(), UserRecordV4::from(v3.clone()).into());
        assert_eq!(
            decode_user(&encode(&v2)).unwrap(),
            UserRecordV4::from(UserRecordV3 { ban_expires_ms: None, ..v3 }).into()
        );
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
        assert_eq!(decode_user(&expected).unwrap(), v4.clone().into());
        assert_eq!(decode_user(&encode(&v3)).unwrap(), UserRecordV4 { two_factor: None, ..v4.clone() }.into());
        let mut none = encode(&v3);
        none[0] = 4;
        none.push(0);
        assert_eq!(encode(&UserRecordV4 { two_factor: None, ..v4 }), none);
    }

    /// An account with a username is written in the fifth format; one without keeps the fourth's bytes exactly
    /// (what the previous release reads), and reads back the same.
    #[test]
    fn user_v5_golden_bytes_and_only_accounts_with_a_username_are_written_so() {
        let v3 =
            UserRecordV3 { ban_expires_ms: Some(64), ..UserRecordV2 { email_verified: true, ..user().into() }.into() };
        let v4 = UserRecordV4::from(v3);
        let plain = UserRecordV5::from(v4.clone());
        assert_eq!(encode(&plain), encode(&v4), "no username: the fourth format, byte for byte");
        assert_eq!(decode_user(&encode(&v4)).unwrap(), plain);
        let named = UserRecordV5 { username: Some("ann".into()), display_username: Some("Ann".into()), ..plain };
        let mut expected = encode(&v4);
        expected[0] = 5;
        expected.extend([1, 3, b'a', b'n', b'n', 1, 3, b'A', b'n', b'n']);
        assert_eq!(encode(&named), expected);
        assert_eq!(decode_user(&expected).unwrap(), named);
        let display_only = UserRecordV5 { username: None, ..named };
        assert_eq!(encode(&display_only)[0], 5);
        assert_eq!(decode_user(&encode(&display_only)).unwrap(), display_only);
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
        assert_eq!(decode_org(&expected).unwrap(), v2.clone().into());
        let without = OrgRecordV2 { logo: None, metadata: None, ..v2 };
        assert_eq!(decode_org(&encode(&v1)).unwrap(), without.into());
    }

    #[test]
    fn org_v3_golden_bytes_and_written_only_with_teams() {
        let v2 = OrgRecordV2 {
            id: [7; 16],
            name: "P".into(),
            slug: "p-1".into(),
            created_at_ms: -1,
            logo: None,
            metadata: None,
        };
        let bare = OrgRecordV3::from(v2.clone());
        assert_eq!(encode_org(&bare.clone().into()), encode(&v2), "no teams: the format the previous release reads");
        assert_eq!(decode_org(&encode_org(&bare.clone().into())).unwrap(), bare.clone().into());
        let member = TeamMemberRecordV1 { user: [2; 16], created_at_ms: 1 };
        let team = TeamRecordV1 {
            id: [3; 16],
            name: "T".into(),
            created_at_ms: 1,
            updated_at_ms: None,
            members: vec![member],
        };
        let v3 = OrgRecordV3 { teams: vec![team], ..bare };
        let mut expected = encode(&v2);
        expected[0] = 3;
        expected.extend([1]);
        expected.extend([3; 16]);
        expected.extend([1, b'T', 2, 0, 1]);
        expected.extend([2; 16]);
        expected.extend([2]);
        assert_eq!(encode_org(&v3.clone().into()), expected);
        assert_eq!(decode_org(&expected).unwrap(), v3.into());
    }

    #[test]
    fn org_v4_golden_bytes_and_written_only_with_roles() {
        let v1 = OrgRecordV1 { id: [7; 16], name: "P".into(), slug: "p-1".into(), created_at_ms: -1 };
        let bare = OrgRecordV4::from(v1.clone());
        assert_eq!(
            encode_org(&bare.clone().into()),
            encode(&OrgRecordV2::from(v1.clone())),
            "no roles, no teams: the second"
        );
        let role = OrgRoleRecordV1 {
            id: [3; 16],
            name: "r".into(),
            grants: vec![("ac".into(), vec!["read".into()])],
            created_at_ms: 1,
            updated_at_ms: None,
        };
        let v4 = OrgRecordV4 { roles: vec![role], ..bare };
        let mut expected = encode(&OrgRecordV2::from(v1));
        expected[0] = 4;
        expected.extend([0, 1]);
        expected.extend([3; 16]);
        expected.extend([1, b'r', 1, 2, b'a', b'c', 1, 4, b'r', b'e', b'a', b'd', 2, 0]);
        assert_eq!(encode_org(&v4.clone().into()), expected);
        assert_eq!(decode_org(&expected).unwrap(), v4.into());
    }

    #[test]
    fn org_v5_golden_bytes_and_written_only_with_the_sso_policy() {
        let v1 = OrgRecordV1 { id: [7; 16], name: "P".into(), slug: "p-1".into(), created_at_ms: -1 };
        let bare = OrgRecordV5::from(v1.clone());
        assert_eq!(encode_org(&bare), encode(&OrgRecordV2::from(v1.clone())), "no policy, no roles: the second");
        let v5 = OrgRecordV5 { require_sso: true, ..bare };
        let mut expected = encode(&OrgRecordV2::from(v1));
        expected[0] = 5;
        expected.extend([0, 0, 1]);
        assert_eq!(encode_org(&v5), expected);
        assert_eq!(decode_org(&expected).unwrap(), v5);
    }

    #[test]
    fn membership_v2_golden_bytes_and_written_only_with_a_custom_role() {
        let v1 = MembershipRecordV1 { org: [1; 16], user: [2; 16], roles: 5, created_at_ms: 64 };
        let bare = MembershipRecordV2::from(v1.clone());
        assert_eq!(encode(&bare), encode(&v1), "no custom role: the first format's bytes");
        assert_eq!(decode_member(&encode(&v1)).unwrap(), bare);
        let v2 = MembershipRecordV2 { custom: vec!["r".into()], ..bare };
        let mut expected = encode(&v1);
        expected[0] = 2;
        expected.extend([1, 1, b'r']);
        assert_eq!(encode(&v2), expected);
        assert_eq!(decode_member(&expected).unwrap(), v2);
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

    /// The invitation the golden bytes pin; its second format adds teams to it.
    fn invitation_v1() -> InvitationRecordV1 {
        InvitationRecordV1 {
            id: [1; 16],
            org: [2; 16],
            email: "a@b".into(),
            roles: 2,
            inviter: [3; 16],
            status: 1,
            expires_at_ms: 2,
            created_at_ms: 1,
        }
    }

    #[test]
    fn invitation_golden_bytes() {
        let i = invitation_v1();
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
    fn invitation_v2_golden_bytes_and_written_only_with_teams() {
        let v1 = invitation_v1();
        let bare = InvitationRecordV2::from(v1.clone());
        assert_eq!(encode(&bare), encode(&v1), "no team: the first format's bytes");
        assert_eq!(decode_invitation(&encode(&v1)).unwrap(), bare);
        let v2 = InvitationRecordV2 { teams: vec![[4; 16], [5; 16]], ..bare };
        let mut expected = encode(&v1);
        expected[0] = 2;
        expected.push(2);
        expected.extend([4; 16]);
        expected.extend([5; 16]);
        assert_eq!(encode(&v2), expected);
        assert_eq!(decode_invitation(&expected).unwrap(), v2);
    }

    /// The session the golden bytes pin; its later formats name the same user.
    fn session_v1() -> SessionRecordV1 {
        SessionRecordV1 {
            id: [3; 16],
            user_id: [4; 16],
            expires_at_ms: 300,
            created_at_ms: 0,
            updated_at_ms: 64,
            ip_address: "::1".into(),
            user_agent: String::new(),
            remember_me: false,
        }
    }

    #[test]
    fn session_golden_bytes() {
        let session = session_v1();
        let mut expected = vec![1];
        expected.extend([3; 16]);
        expected.extend([4; 16]);
        expected.extend([0xd8, 0x04, 0, 0x80, 0x01, 3, b':', b':', b'1', 0, 0]);
        assert_eq!(encode(&session), expected);
        assert_eq!(decode::<SessionRecordV1>(&expected).unwrap(), session);
        assert_eq!(decode_session(&expected).unwrap(), SessionRecordV4::from(SessionRecordV2::from(session.clone())));

        let v2 = SessionRecordV2 { impersonated_by: Some([5; 16]), ..session.into() };
        expected[0] = 2;
        expected.push(1);
        expected.extend([5; 16]);
        assert_eq!(encode(&v2), expected);
        assert_eq!(decode_session(&expected).unwrap(), SessionRecordV4::from(v2.clone()));

        let v3 = SessionRecordV3 { active_organization: Some([6; 16]), ..v2.into() };
        expected[0] = 3;
        expected.push(1);
        expected.extend([6; 16]);
        assert_eq!(encode(&v3), expected);
        assert_eq!(decode_session(&expected).unwrap(), SessionRecordV4::from(v3.clone()));
        // Without an active team the fourth format writes the third's bytes, which the previous release reads.
        assert_eq!(encode(&SessionRecordV4::from(v3.clone())), expected);

        let v4 = SessionRecordV4 { active_team: Some([7; 16]), ..v3.into() };
        expected[0] = 4;
        expected.push(1);
        expected.extend([7; 16]);
        assert_eq!(encode(&v4), expected);
        assert_eq!(decode_session(&expected).unwrap(), v4);
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
        assert_eq!(decode_token(&expected).unwrap(), v4.clone().into());
        assert_eq!(decode_token(&encode(&v3)).unwrap(), TokenRecordV4 { code: None, ..v4 }.into());
    }

    fn v4_token() -> TokenRecordV4 {
        TokenRecordV4 {
            kind: 1,
            user_id: [8; 16],
            created_at_ms: 1,
            expires_at_ms: 64,
            requested_by: None,
            failures: 2,
            code: Some([5; 32]),
        }
    }

    #[test]
    fn token_v5_golden_bytes_and_only_new_kinds_are_written_so() {
        let v5 = TokenRecordV5 {
            kind: 7,
            email: Some("a@b.co".into()),
            name: Some("N".into()),
            ..TokenRecordV5::from(v4_token())
        };
        let mut expected = vec![5, 7];
        expected.extend([8; 16]);
        expected.extend([2, 0x80, 0x01, 0, 2, 1]);
        expected.extend([5; 32]);
        expected.extend([1, 6, b'a', b'@', b'b', b'.', b'c', b'o', 1, 1, b'N']);
        assert_eq!(encode(&v5), expected);
        assert_eq!(encode_token(&v5), expected);
        assert_eq!(decode_token(&expected).unwrap(), v5);
        // A code of `emailOTP` has no address, yet its kind is new: the fifth format too.
        let code = TokenRecordV5 { kind: 8, email: None, name: None, ..v5.clone() };
        assert_eq!(encode_token(&code)[0], 5);
        assert_eq!(decode_token(&encode_token(&code)).unwrap(), code);
        // The kinds the previous release knows: the fourth format, byte for byte, and read back the same.
        for kind in 1..=6 {
            let old: TokenRecord = TokenRecordV4 { kind, ..v4_token() }.into();
            assert_eq!(encode_token(&old), encode(&TokenRecordV4 { kind, ..v4_token() }));
            assert_eq!(decode_token(&encode_token(&old)).unwrap(), old);
        }
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
    fn a_session_of_any_format_names_its_user() {
        let v1 = session_v1();
        let v2 = SessionRecordV2 { impersonated_by: Some([5; 16]), ..v1.clone().into() };
        let v3 = SessionRecordV3 { active_organization: Some([6; 16]), ..v2.clone().into() };
        let v4 = SessionRecordV4 { active_team: Some([7; 16]), ..v3.clone().into() };
        for bytes in [encode(&v1), encode(&v2), encode(&v3), encode(&v4)] {
            assert_eq!(session_user(&bytes).unwrap(), [4; 16]);
        }
        assert!(matches!(session_user(&[4; 20]), Err(StoreError::Corrupt(_))));
    }

    /// The rolling-upgrade rule: a token or a session of a format above this release's is skipped (not held), any
    /// other kind is refused with a message that says to upgrade; the formats this release knows read as before.
    #[test]
    fn newer_tokens_and_sessions_are_skipped_and_other_kinds_refused() {
        let token: TokenRecord = TokenRecordV3::from(TokenRecordV2::from(TokenRecordV1 {
            kind: 1,
            user_id: [2; 16],
            created_at_ms: 1,
            expires_at_ms: 9,
        }))
        .into();
        assert_eq!(read_token(&encode(&token)).unwrap(), Some(token.clone()));
        let before = newer_records_skipped();
        let mut newer = encode(&token);
        newer[0] = TokenRecordV5::VERSION + 1;
        newer.extend([1, 2, 3]);
        assert_eq!(read_token(&newer).unwrap(), None);
        let mut session = encode(&SessionRecordV3::from(SessionRecordV2::from(session_v1())));
        assert!(read_session(&session).unwrap().is_some());
        session[0] = SessionRecordV4::VERSION + 1;
        assert_eq!(read_session(&session).unwrap(), None);
        assert_eq!(session_user(&session).unwrap(), [4; 16]);
        assert!(newer_records_skipped() >= before + 2);
        let mut user = encode(&UserRecordV5 {
            username: Some("ann".into()),
            ..UserRecordV4::from(UserRecordV3::from(UserRecordV2::from(user()))).into()
        });
        user[0] = UserRecordV5::VERSION + 1;
        let refused = decode_user(&user).unwrap_err().to_string();
        assert!(refused.contains("format version 6, newer than") && refused.contains("upgrade this node"), "{refused}");
    }

    /// What the previous release (the one before rolling upgrades were defined) reads, kind by kind: the newest
    /// format byte it decodes. This release must write none above it, or a cluster could not be upgraded one node
    /// at a time. Raise a written version only in a release after one that reads it (then update this table to
    /// that release's).
    #[test]
    fn this_release_writes_what_the_previous_one_reads() {
        use crate::store::linked::LinkedAccountRecordV1;
        let previous_reads = [
            ("user", 4),
            ("session", 3),
            ("token", 4),
            ("organization", 2),
            ("membership", 1),
            ("invitation", 1),
            ("linked account", 1),
        ];
        let written = [
            // Accounts with a username are new in this release (written in the fifth format, which stops an
            // older node: docs/cluster.md); the others keep the fourth.
            (
                UserRecord::KIND,
                encode(&UserRecord::from(UserRecordV4::from(UserRecordV3::from(UserRecordV2::from(user())))))[0],
            ),
            // A session without an active team (every session unless teams are turned on, which docs/cluster.md
            // says to do only once every node runs this release).
            (SessionRecord::KIND, encode(&SessionRecordV4::from(SessionRecordV2::from(session_v1())))[0]),
            // Every kind the previous release knows is still written in its format (the new kinds, which it skips,
            // are in `token_v5_golden_bytes_and_only_new_kinds_are_written_so`).
            (TokenRecord::KIND, encode_token(&TokenRecordV4 { kind: 6, ..v4_token() }.into())[0]),
            // An organization without teams (every organization unless teams are turned on, which docs/cluster.md
            // says to do only once every node runs this release).
            (
                OrgRecord::KIND,
                encode_org(&OrgRecordV1 { id: [1; 16], name: "o".into(), slug: "o".into(), created_at_ms: 0 }.into())
                    [0],
            ),
            // A membership without a custom role (every one unless dynamic_roles is turned on, which
            // docs/cluster.md says to do only once every node runs this release).
            (
                MembershipRecord::KIND,
                encode(&MembershipRecord::from(MembershipRecordV1 {
                    org: [1; 16],
                    user: [2; 16],
                    roles: 4,
                    created_at_ms: 0,
                }))[0],
            ),
            // An invitation into no team (every one unless teams are turned on, which docs/cluster.md says to do
            // only once every node runs this release).
            (InvitationRecord::KIND, encode(&InvitationRecord::from(invitation_v1()))[0]),
            (LinkedAccountRecordV1::KIND, LinkedAccountRecordV1::VERSION),
        ];
        assert_eq!(written, previous_reads);
        // API keys are new in this release: an entry carrying none keeps the format the previous release reads;
        // one carrying a key stops an older node's follower (docs/cluster.md says to upgrade every node first).
        assert_eq!(
            crate::store::changes::VERSION_WITHOUT_API_KEYS,
            3,
            "the change log's entry format the previous release reads"
        );
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
