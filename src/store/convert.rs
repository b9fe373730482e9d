//! Domain values ↔ persisted records, both ways. The only place that knows both shapes: a new field is added to
//! the domain type, the record (as a new version) and here, and nowhere else.
//!
//! Records read back were validated before they were written, so they are rebuilt with the domain types'
//! `from_trusted` constructors instead of being parsed again (a tightened rule must not make old data unloadable).

use std::sync::Arc;

use super::StoreError;
use super::records::{
    AuditRecordV1, InvitationRecord, MembershipRecord, OrgRecord, OrgRoleRecordV1, OutboxRecordV1, SessionRecord,
    TeamMemberRecordV1, TeamRecordV1, TokenRecord, TwoFactorRecordV1, UserRecord,
};
use crate::domain::{
    AuditEntry, AuditId, CustomRole, Email, Grants, Invitation, InvitationId, InvitationStatus, InvitedTeams,
    LinkAddress, Mail, MailId, MemberRoles, Membership, Name, OneTimeToken, OrgId, Organization, RoleId, RoleName,
    RoleSet, Session, SessionId, SessionRare, Slug, Team, TeamId, TeamMember, Timestamp, TokenKind, TwoFactor, User,
    UserAgent, UserFields, UserId,
};

pub fn user_record(user: &User) -> UserRecord {
    UserRecord {
        id: user.id.to_bytes(),
        name: user.name().to_owned(),
        email: user.email().to_owned(),
        image: user.image().map(str::to_owned),
        role: user.role.as_str().to_owned(),
        banned: user.banned,
        ban_reason: user.ban_reason().map(str::to_owned),
        organization_id: user.organization_id.map(OrgId::to_bytes),
        password_hash: user.password_hash().as_phc().into_owned(),
        created_at_ms: user.created_at.as_millis(),
        updated_at_ms: user.updated_at.as_millis(),
        email_verified: user.email_verified,
        ban_expires_ms: user.ban_expires().map(Timestamp::as_millis),
        two_factor: user.two_factor().map(|t| TwoFactorRecordV1 {
            sealed_secret: t.sealed_secret.to_vec(),
            enabled: t.enabled,
            last_step: t.last_step,
            backup_codes: t.backup_codes.to_vec(),
        }),
        username: user.username().map(|u| u.as_str().to_owned()),
        display_username: user.display_username().map(str::to_owned),
    }
}

/// `roles` turns the stored role name back into a [`crate::domain::Role`]; a role no longer configured is kept.
pub fn user(r: UserRecord, roles: &RoleSet) -> User {
    User::from(UserFields {
        id: UserId::from_bytes(r.id),
        name: Name::from_trusted(r.name),
        email: Email::from_trusted(r.email),
        email_verified: r.email_verified,
        image: r.image.map(String::into_boxed_str),
        role: roles.from_store(&r.role),
        banned: r.banned,
        ban_reason: r.ban_reason.map(String::into_boxed_str),
        ban_expires: r.ban_expires_ms.map(Timestamp::from_millis),
        organization_id: r.organization_id.map(OrgId::from_bytes),
        password_hash: r.password_hash.into(),
        created_at: Timestamp::from_millis(r.created_at_ms),
        updated_at: Timestamp::from_millis(r.updated_at_ms),
        two_factor: r.two_factor.map(|t| {
            std::sync::Arc::new(TwoFactor {
                sealed_secret: t.sealed_secret.into_boxed_slice(),
                enabled: t.enabled,
                last_step: t.last_step,
                backup_codes: t.backup_codes.into_boxed_slice(),
            })
        }),
        username: r.username.map(crate::domain::Username::from_trusted),
        display_username: r.display_username.map(String::into_boxed_str),
    })
}

pub fn org_record(org: &Organization) -> OrgRecord {
    OrgRecord {
        id: org.id.to_bytes(),
        name: org.name.as_str().to_owned(),
        slug: org.slug.as_str().to_owned(),
        created_at_ms: org.created_at.as_millis(),
        logo: org.logo.as_deref().map(str::to_owned),
        metadata: org.metadata.as_deref().map(str::to_owned),
        teams: org
            .teams
            .iter()
            .map(|t| TeamRecordV1 {
                id: t.id.to_bytes(),
                name: t.name.as_str().to_owned(),
                created_at_ms: t.created_at.as_millis(),
                updated_at_ms: t.updated_at.map(Timestamp::as_millis),
                members: t
                    .members
                    .iter()
                    .map(|m| TeamMemberRecordV1 { user: m.user.to_bytes(), created_at_ms: m.created_at.as_millis() })
                    .collect(),
            })
            .collect(),
        roles: org
            .roles
            .iter()
            .map(|r| OrgRoleRecordV1 {
                id: r.id.to_bytes(),
                name: r.name.as_str().to_owned(),
                grants: r
                    .grants
                    .iter()
                    .map(|(res, a)| (res.to_owned(), a.iter().map(|x| x.to_string()).collect()))
                    .collect(),
                created_at_ms: r.created_at.as_millis(),
                updated_at_ms: r.updated_at.map(Timestamp::as_millis),
            })
            .collect(),
        require_sso: org.require_sso,
    }
}

pub fn org(r: OrgRecord) -> Organization {
    Organization {
        id: OrgId::from_bytes(r.id),
        name: Name::from_trusted(r.name),
        slug: Slug::from_trusted(r.slug),
        logo: r.logo.map(String::into_boxed_str),
        metadata: r.metadata.map(String::into_boxed_str),
        created_at: Timestamp::from_millis(r.created_at_ms),
        teams: r
            .teams
            .into_iter()
            .map(|t| Team {
                id: TeamId::from_bytes(t.id),
                name: Name::from_trusted(t.name),
                created_at: Timestamp::from_millis(t.created_at_ms),
                updated_at: t.updated_at_ms.map(Timestamp::from_millis),
                members: t
                    .members
                    .into_iter()
                    .map(|m| TeamMember {
                        user: UserId::from_bytes(m.user),
                        created_at: Timestamp::from_millis(m.created_at_ms),
                    })
                    .collect(),
            })
            .collect(),
        roles: r
            .roles
            .into_iter()
            .map(|r| CustomRole {
                id: RoleId::from_bytes(r.id),
                name: RoleName::from_trusted(r.name),
                grants: Grants::from_trusted(r.grants),
                created_at: Timestamp::from_millis(r.created_at_ms),
                updated_at: r.updated_at_ms.map(Timestamp::from_millis),
            })
            .collect(),
        require_sso: r.require_sso,
    }
}

pub fn membership_record(m: &Membership) -> MembershipRecord {
    MembershipRecord {
        org: m.org.to_bytes(),
        user: m.user.to_bytes(),
        roles: m.roles.bits(),
        created_at_ms: m.created_at.as_millis(),
        custom: m.roles.custom().iter().map(|c| c.as_str().to_owned()).collect(),
    }
}

pub fn membership(r: &MembershipRecord) -> Membership {
    Membership::new(
        OrgId::from_bytes(r.org),
        UserId::from_bytes(r.user),
        MemberRoles::from_store(r.roles, r.custom.clone()),
        Timestamp::from_millis(r.created_at_ms),
    )
}

pub fn invitation_record(i: &Invitation) -> InvitationRecord {
    InvitationRecord {
        id: i.id.to_bytes(),
        org: i.org.to_bytes(),
        email: i.email.as_str().to_owned(),
        roles: i.roles.bits(),
        inviter: i.inviter.to_bytes(),
        status: i.status.code(),
        expires_at_ms: i.expires_at.as_millis(),
        created_at_ms: i.created_at.as_millis(),
        teams: i.teams.iter().map(TeamId::to_bytes).collect(),
    }
}

pub fn invitation(r: &InvitationRecord) -> Invitation {
    Invitation {
        id: InvitationId::from_bytes(r.id),
        org: OrgId::from_bytes(r.org),
        email: Email::from_trusted(r.email.clone()),
        roles: MemberRoles::from_bits(r.roles),
        inviter: UserId::from_bytes(r.inviter),
        status: InvitationStatus::from_code(r.status),
        expires_at: Timestamp::from_millis(r.expires_at_ms),
        created_at: Timestamp::from_millis(r.created_at_ms),
        teams: InvitedTeams::new(r.teams.iter().copied().map(TeamId::from_bytes)),
    }
}

pub fn session_record(session: &Session) -> SessionRecord {
    SessionRecord {
        id: session.id.to_bytes(),
        user_id: session.user_id.to_bytes(),
        expires_at_ms: session.expires_at.as_millis(),
        created_at_ms: session.created_at.as_millis(),
        updated_at_ms: session.updated_at.as_millis(),
        ip_address: session.ip_address.as_str().to_owned(),
        user_agent: session.user_agent.as_str().to_owned(),
        remember_me: session.remember_me,
        impersonated_by: session.impersonated_by().map(UserId::to_bytes),
        active_organization: session.active_organization().map(OrgId::to_bytes),
        active_team: session.active_team().map(TeamId::to_bytes),
    }
}

pub fn session(r: SessionRecord) -> Session {
    let agent = UserAgent::from(r.user_agent.as_str());
    session_with_agent(r, agent)
}

/// [`session`], with its user agent given (a copy shared with other sessions) instead of made from the record's.
pub fn session_with_agent(r: SessionRecord, user_agent: UserAgent) -> Session {
    Session {
        id: SessionId::from_bytes(r.id),
        user_id: UserId::from_bytes(r.user_id),
        expires_at: Timestamp::from_millis(r.expires_at_ms),
        created_at: Timestamp::from_millis(r.created_at_ms),
        updated_at: Timestamp::from_millis(r.updated_at_ms),
        ip_address: r.ip_address.into(),
        user_agent,
        remember_me: r.remember_me,
        rare: SessionRare::with_team(
            r.impersonated_by.map(UserId::from_bytes),
            r.active_organization.map(OrgId::from_bytes),
            r.active_team.map(TeamId::from_bytes),
        ),
    }
}

pub fn audit_record(entry: &AuditEntry) -> AuditRecordV1 {
    AuditRecordV1 {
        id: entry.id.to_bytes(),
        at_ms: entry.at.as_millis(),
        action: entry.action.clone(),
        actor: entry.actor.map(UserId::to_bytes),
        target: entry.target.map(uuid::Uuid::into_bytes),
        ip_address: entry.ip_address.clone(),
        detail: entry.detail.clone(),
    }
}

pub fn audit(r: AuditRecordV1) -> AuditEntry {
    AuditEntry {
        id: AuditId::from_bytes(r.id),
        at: Timestamp::from_millis(r.at_ms),
        action: r.action,
        actor: r.actor.map(UserId::from_bytes),
        target: r.target.map(uuid::Uuid::from_bytes),
        ip_address: r.ip_address,
        detail: r.detail,
    }
}

pub fn token_record(token: &OneTimeToken) -> TokenRecord {
    TokenRecord {
        kind: token.kind.code(),
        user_id: token.user_id.to_bytes(),
        created_at_ms: token.created_at.as_millis(),
        expires_at_ms: token.expires_at.as_millis(),
        requested_by: token.requested_by,
        failures: token.failures,
        code: token.code,
        email: token.address.as_ref().map(|a| a.email.as_str().to_owned()),
        name: token.address.as_ref().and_then(|a| a.name.as_ref().map(|n| n.as_str().to_owned())),
    }
}

/// A token of a kind this version does not know is corrupt, not silently something else.
pub fn token(r: TokenRecord) -> Result<OneTimeToken, StoreError> {
    let kind = TokenKind::from_code(r.kind).ok_or_else(|| StoreError::Corrupt(format!("token kind {}", r.kind)))?;
    let address = match r.email {
        Some(email) => {
            Some(Arc::new(LinkAddress { email: Email::from_trusted(email), name: r.name.map(Name::from_trusted) }))
        }
        None => None,
    };
    Ok(OneTimeToken {
        kind,
        user_id: UserId::from_bytes(r.user_id),
        created_at: Timestamp::from_millis(r.created_at_ms),
        expires_at: Timestamp::from_millis(r.expires_at_ms),
        requested_by: r.requested_by,
        failures: r.failures,
        code: r.code,
        address,
    })
}

pub fn mail_record(mail: &Mail) -> OutboxRecordV1 {
    OutboxRecordV1 {
        id: mail.id.to_bytes(),
        to: mail.to.as_str().to_owned(),
        subject: mail.subject.clone(),
        text: mail.text.clone(),
        html: mail.html.clone(),
        created_at_ms: mail.created_at.as_millis(),
    }
}

pub fn mail(r: OutboxRecordV1) -> Mail {
    Mail {
        id: MailId::from_bytes(r.id),
        to: Email::from_trusted(r.to),
        subject: r.subject,
        text: r.text,
        html: r.html,
        created_at: Timestamp::from_millis(r.created_at_ms),
    }
}

pub fn passkey_record(p: &crate::domain::Passkey) -> super::PasskeyRecordV1 {
    super::PasskeyRecordV1 {
        id: p.id.to_bytes(),
        user_id: p.user_id.to_bytes(),
        name: p.name.as_ref().map(|n| n.as_str().to_owned()),
        credential_id: p.credential_id.clone(),
        public_key: p.public_key.clone(),
        counter: p.counter,
        backup_eligible: p.backup_eligible,
        backed_up: p.backed_up,
        transports: p.transports.clone(),
        aaguid: p.aaguid.map(uuid::Uuid::into_bytes),
        created_at_ms: p.created_at.as_millis(),
    }
}

pub fn passkey(r: super::PasskeyRecordV1) -> crate::domain::Passkey {
    crate::domain::Passkey {
        id: crate::domain::PasskeyId::from_bytes(r.id),
        user_id: UserId::from_bytes(r.user_id),
        name: r.name.map(Name::from_trusted),
        credential_id: r.credential_id,
        public_key: r.public_key,
        counter: r.counter,
        backup_eligible: r.backup_eligible,
        backed_up: r.backed_up,
        transports: r.transports,
        aaguid: r.aaguid.map(uuid::Uuid::from_bytes),
        created_at: Timestamp::from_millis(r.created_at_ms),
    }
}

pub fn ceremony_record(c: &crate::domain::Ceremony) -> super::PasskeyChallengeRecordV1 {
    super::PasskeyChallengeRecordV1 {
        kind: c.kind.code(),
        user_id: c.user.map(UserId::to_bytes),
        state: c.state.clone(),
        expires_at_ms: c.expires_at.as_millis(),
    }
}

pub fn ceremony(r: super::PasskeyChallengeRecordV1) -> Result<crate::domain::Ceremony, StoreError> {
    let kind = crate::domain::CeremonyKind::from_code(r.kind)
        .ok_or_else(|| StoreError::Corrupt(format!("passkey ceremony kind {}", r.kind)))?;
    Ok(crate::domain::Ceremony {
        kind,
        user: r.user_id.map(UserId::from_bytes),
        state: r.state,
        expires_at: Timestamp::from_millis(r.expires_at_ms),
    })
}

/// An API key's record, with its counts as they stand (written with each change of the key).
pub fn api_key_record(key: &crate::domain::ApiKey) -> super::api_key_records::ApiKeyRecordV1 {
    let usage = key.usage();
    super::api_key_records::ApiKeyRecordV1 {
        id: key.id.to_bytes(),
        user_id: key.user_id.to_bytes(),
        hash: key.hash,
        config_id: key.config_id.clone(),
        name: key.name.clone(),
        start: key.start.clone(),
        prefix: key.prefix.clone(),
        enabled: key.enabled,
        expires_at_ms: key.expires_at.map(Timestamp::as_millis),
        created_at_ms: key.created_at.as_millis(),
        updated_at_ms: key.updated_at.as_millis(),
        rate_limit_enabled: key.rate_limit_enabled,
        rate_limit_time_window_ms: key.rate_limit_time_window_ms,
        rate_limit_max: key.rate_limit_max,
        request_count: usage.request_count,
        last_request_ms: usage.last_request.map(Timestamp::as_millis),
        remaining: usage.remaining,
        refill_amount: key.refill_amount,
        refill_interval_ms: key.refill_interval_ms,
        last_refill_at_ms: usage.last_refill_at.map(Timestamp::as_millis),
        permissions: key.permissions.clone(),
        metadata: key.metadata.clone(),
    }
}

/// Key record `r` after one use of its quota at `at` ([`crate::domain::ApiKey::take_quota_at`]); `None` when it
/// has none left. How each store counts a use against the copy it holds.
pub fn api_key_used(
    r: super::api_key_records::ApiKeyRecordV1,
    at: Timestamp,
) -> Option<super::api_key_records::ApiKeyRecordV1> {
    let key = api_key(r);
    key.take_quota_at(at).ok()?;
    Some(api_key_record(&key))
}

pub fn api_key(r: super::api_key_records::ApiKeyRecordV1) -> crate::domain::ApiKey {
    use crate::domain::api_key::Usage;
    let usage = Usage {
        request_count: r.request_count,
        last_request: r.last_request_ms.map(Timestamp::from_millis),
        remaining: r.remaining,
        last_refill_at: r.last_refill_at_ms.map(Timestamp::from_millis),
    };
    crate::domain::ApiKey {
        id: crate::domain::ApiKeyId::from_bytes(r.id),
        user_id: UserId::from_bytes(r.user_id),
        hash: r.hash,
        config_id: r.config_id,
        name: r.name,
        start: r.start,
        prefix: r.prefix,
        enabled: r.enabled,
        expires_at: r.expires_at_ms.map(Timestamp::from_millis),
        created_at: Timestamp::from_millis(r.created_at_ms),
        updated_at: Timestamp::from_millis(r.updated_at_ms),
        rate_limit_enabled: r.rate_limit_enabled,
        rate_limit_time_window_ms: r.rate_limit_time_window_ms,
        rate_limit_max: r.rate_limit_max,
        refill_amount: r.refill_amount,
        refill_interval_ms: r.refill_interval_ms,
        permissions: r.permissions,
        metadata: r.metadata,
        usage: std::sync::Arc::new(std::sync::Mutex::new(usage)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Role;

    #[test]
    fn every_record_round_trips() {
        let roles = RoleSet::new(&["admin".into(), "user".into()], "user");
        let now = Timestamp::from_millis(1_700_000_000_123);
        let u = User::from(UserFields {
            name: Name::parse("Alice").unwrap(),
            email_verified: true,
            image: Some("https://example.com/a.png".into()),
            role: Role::admin(),
            banned: true,
            ban_reason: Some("why".into()),
            ban_expires: Some(now),
            organization_id: Some(OrgId::new()),
            ..User::fixture("alice@example.com", now).fields()
        });
        assert_eq!(user(user_record(&u), &roles), u);
        let o = Organization {
            id: OrgId::new(),
            name: Name::parse("St Mary").unwrap(),
            slug: Slug::parse("st-mary").unwrap(),
            logo: Some("https://example.com/l.png".into()),
            metadata: Some("{\"a\":1}".into()),
            created_at: now,
            teams: vec![Team {
                id: TeamId::new(),
                name: Name::parse("Ward 4").unwrap(),
                created_at: now,
                updated_at: None,
                members: vec![TeamMember { user: u.id, created_at: now }],
            }],
            roles: vec![CustomRole {
                id: RoleId::new(),
                name: RoleName::from_trusted("inviter"),
                grants: Grants::from_trusted(vec![("invitation".into(), vec!["create".into()])]),
                created_at: Timestamp::from_millis(3),
                updated_at: Some(Timestamp::from_millis(4)),
            }],
            require_sso: true,
        };
        assert_eq!(org(org_record(&o)), o);
        let s = Session {
            id: SessionId::new(),
            user_id: u.id,
            expires_at: now,
            created_at: now,
            updated_at: now,
            ip_address: "192.0.2.1".into(),
            user_agent: "curl".into(),
            remember_me: false,
            rare: SessionRare::new(Some(u.id), Some(o.id)),
        };
        assert_eq!(session(session_record(&s)), s);
        let m = Membership::new(o.id, u.id, MemberRoles::parse(["owner,member"]).unwrap(), now);
        assert_eq!(membership(&membership_record(&m)), m);
        let i = Invitation {
            id: InvitationId::random(),
            org: o.id,
            email: u.email_address(),
            roles: MemberRoles::parse(["admin"]).unwrap(),
            inviter: u.id,
            status: InvitationStatus::Rejected,
            expires_at: now,
            created_at: now,
            teams: InvitedTeams::new([TeamId::new(), TeamId::new()]),
        };
        assert_eq!(invitation(&invitation_record(&i)), i);
        let a = AuditEntry {
            id: AuditId::new(),
            at: now,
            action: "user.banned".into(),
            actor: Some(u.id),
            target: Some(u.id.into()),
            ip_address: "192.0.2.1".into(),
            detail: "why".into(),
        };
        assert_eq!(audit(audit_record(&a)), a);
        let t = OneTimeToken {
            kind: TokenKind::PasswordReset,
            user_id: u.id,
            created_at: now,
            expires_at: now,
            requested_by: Some([3; 16]),
            failures: 2,
            code: None,
            address: None,
        };
        assert_eq!(token(token_record(&t)).unwrap(), t);
        let mailed = OneTimeToken { kind: TokenKind::TwoFactorOtp, code: Some([4; 32]), ..t.clone() };
        assert_eq!(token(token_record(&mailed)).unwrap(), mailed);
        let m = Mail {
            id: MailId::new(),
            to: u.email_address(),
            subject: "Reset".into(),
            text: "t".into(),
            html: "<p>h</p>".into(),
            created_at: now,
        };
        assert_eq!(mail(mail_record(&m)), m);
    }
}
