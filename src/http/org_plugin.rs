//! `/api/auth/organization/*`: the better-auth organization plugin's calls, with its shapes and codes, so front ends
//! built on `organizationClient()` work unchanged. Teams and custom (dynamic) roles are not served: the roles are
//! `owner`, `admin` and `member` with the plugin's default permissions.
//!
//! Each handler reads parse → facade → answer. Whether the caller may do a thing is decided from their membership
//! as it is now (reads) and again in the users actor's message order (changes): an organization's owner or admin
//! acts in that organization only, never in another one and never through a global administrator's call.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{Map, Value};

use super::AppState;
use super::dto::{
    InvitationAnswered, MemberEnded, MemberRole, PermissionCheck, PluginInvitation, PluginMember, PluginOrganization,
    PluginTeam, STATUS, json_str,
};
use super::extract::{self, Ctx, Fields};
use super::fields::validated_name;
use super::response::{Body, Failure, json_bytes, ok};
use crate::accounts::{Current, MemberError, OrgError, OrgRef, Target};
use crate::domain::{
    Email, Invitation, InvitationId, InvitedTeams, MemberId, MemberRoles, Membership, OrgId, Organization, RolesError,
    SessionToken, Slug, TeamId, User,
};

// --- answers --------------------------------------------------------------------------------------------------

fn organization(o: &Organization) -> PluginOrganization<'_> {
    PluginOrganization::from(o)
}

fn member<'a>(m: &Membership, user: Option<&'a User>) -> PluginMember<'a> {
    PluginMember::new(m, user)
}

fn invitation(i: &Invitation) -> PluginInvitation<'_> {
    PluginInvitation::from(i)
}

/// A member with their account as [`PluginMember`] shows it (its fields in alphabetical order), appended as bytes:
/// `list-members` answers up to `membership_limit` of them. Through serde each key and each id or time went
/// through its string escaping, a fifth of the server's time on a page of 100; only the texts a person chose
/// (name, e-mail, image) can need escaping. A unit test pins the bytes to the `Value`'s.
fn append_member(out: &mut Vec<u8>, m: &Membership, u: &User) {
    out.extend_from_slice(b"{\"createdAt\":\"");
    m.created_at.append_rfc3339(out);
    out.extend_from_slice(b"\",\"id\":\"");
    m.id.append_hyphenated(out);
    out.extend_from_slice(b"\",\"organizationId\":\"");
    m.org.append_hyphenated(out);
    out.extend_from_slice(b"\",\"role\":");
    if m.roles.custom().is_empty() {
        // The built-in roles' names (`owner`, `admin`, `member`) need no escaping, nor a string made for them.
        out.push(b'"');
        for (n, role) in m.roles.roles().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            out.extend_from_slice(role.as_str().as_bytes());
        }
        out.push(b'"');
    } else {
        // Roles the organization defined (`dynamic_roles`) are named by people: escaped as any text.
        json_str(out, &m.roles.to_string());
    }
    out.extend_from_slice(b",\"user\":{\"email\":");
    json_str(out, u.email());
    out.extend_from_slice(b",\"id\":\"");
    u.id.append_hyphenated(out);
    out.extend_from_slice(b"\",\"image\":");
    match u.image() {
        Some(image) => json_str(out, image),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"name\":");
    json_str(out, u.name());
    out.extend_from_slice(b"},\"userId\":\"");
    m.user.append_hyphenated(out);
    out.extend_from_slice(b"\"}");
}

/// `list-members`' answer, `{members, total}`, as bytes (see [`append_member`]), in one allocation.
fn member_page_json(page: &[(Arc<Membership>, Arc<User>)], total: usize) -> Vec<u8> {
    // The fixed part of a member is 290 bytes (keys, four ids, a time, a role, `null`).
    let texts: usize = page.iter().map(|(_, u)| 300 + u.name().len() + u.email().len()).sum();
    let images: usize = page.iter().filter_map(|(_, u)| u.image().map(str::len)).sum();
    let mut out = Vec::with_capacity(32 + texts + images);
    out.extend_from_slice(b"{\"members\":[");
    for (n, (m, u)) in page.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        append_member(&mut out, m, u);
    }
    out.extend_from_slice(b"],\"total\":");
    out.extend_from_slice(total.to_string().as_bytes());
    out.push(b'}');
    out
}

// --- reading requests ----------------------------------------------------------------------------------------

pub(super) async fn body(state: &AppState, req: Request<Incoming>, known: &[&str]) -> Result<Fields, Failure> {
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(known)?;
    Ok(body)
}

/// `organizationId` (or the active organization) as an id, for calls that refuse an unknown one as not a member.
fn named_id(current: &Current, id: Option<&str>, missing: OrgError) -> Result<OrgId, Failure> {
    match id {
        Some(id) => Ok(OrgId::parse(id).unwrap_or_else(|| OrgId::from_bytes([0; 16]))),
        None => current.session.active_organization().ok_or_else(|| missing.into()),
    }
}

fn roles(value: Option<&Value>) -> Result<MemberRoles, Failure> {
    roles_with(value, MemberRoles::parse)
}

fn roles_with<'a>(
    value: Option<&'a Value>,
    parse: impl FnOnce(Vec<&'a str>) -> Result<MemberRoles, RolesError>,
) -> Result<MemberRoles, Failure> {
    let names: Vec<&str> = match value {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(list)) if list.iter().all(Value::is_string) => {
            list.iter().filter_map(Value::as_str).collect()
        }
        _ => return Err(Failure::validation("[body.role] Invalid input: expected string or array of strings")),
    };
    parse(names).map_err(|e| match e {
        RolesError::Empty => Failure::bad_request("ROLE_NOT_FOUND", "Role not found"),
        RolesError::Unknown(names) => {
            Failure::bad_request("ROLE_NOT_FOUND", format!("ROLE_NOT_FOUND: {}", names.join(", ")))
        }
    })
}

fn metadata(body: &Fields, key: &str) -> Result<Option<Box<str>>, Failure> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(map)) => Ok(Some(Value::Object(map.clone()).to_string().into_boxed_str())),
        Some(_) => Err(Failure::validation(format!("[body.{key}] Invalid input: expected object"))),
    }
}

fn logo(body: &Fields) -> Result<Option<Option<Box<str>>>, Failure> {
    match body.nullable_string("logo")? {
        Some(Some(l)) if l.len() > 2048 => Err(Failure::validation("[body.logo] at most 2048 characters")),
        other => Ok(other.map(|l| l.map(Into::into))),
    }
}

fn slug(raw: &str) -> Result<Slug, Failure> {
    Slug::parse(raw).map_err(|e| Failure::validation(e.to_string()))
}

pub(super) fn query(req: &Request<Incoming>, known: &[&str]) -> Result<impl Fn(&str) -> Option<String>, Failure> {
    let q = req.uri().query().map(str::to_owned);
    extract::query_only(q.as_deref(), known)?;
    Ok(move |name: &str| extract::query_value(q.as_deref(), name))
}

fn number(value: Option<String>, name: &str) -> Result<Option<usize>, Failure> {
    value
        .map(|v| v.parse::<usize>().map_err(|_| Failure::validation(format!("{name} must be a whole number"))))
        .transpose()
}

pub(super) fn ip(ctx: &Ctx) -> String {
    ctx.ip.to_string()
}

pub(super) async fn signed_in(state: &AppState, req: &Request<Incoming>) -> Result<(SessionToken, Current), Failure> {
    extract::signed_in(state, req.headers()).await
}

// --- organizations --------------------------------------------------------------------------------------------

/// `POST create`: the caller becomes its `owner`; the session works in it unless `keepCurrentActiveOrganization`.
pub async fn create(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (token, current) = signed_in(state, &req).await?;
    let body = body(state, req, &["name", "slug", "logo", "metadata", "keepCurrentActiveOrganization"]).await?;
    let name = validated_name(body.string("name")?)?;
    let slug = slug(body.string("slug")?)?;
    let logo = logo(&body)?.flatten();
    let metadata = metadata(&body, "metadata")?;
    let keep = body.optional_bool("keepCurrentActiveOrganization")?.unwrap_or(false);
    let active_in = (!keep).then(|| token.hash());
    let (org, owner) =
        state.accounts.create_owned_organization(&current, active_in, name, slug, logo, metadata, ip(&ctx)).await?;
    let answer = PluginOrganization { members: Some(vec![member(&owner, None)]), ..organization(&org) };
    Ok(ok(&answer))
}

/// `POST check-slug`: `{status: true}` when free.
pub async fn check_slug(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    signed_in(state, &req).await?;
    let body = body(state, req, &["slug"]).await?;
    if state.accounts.slug_free(body.string("slug")?) { Ok(ok(&STATUS)) } else { Err(OrgError::SlugTaken.into()) }
}

/// `POST update` `{data: {name?, slug?, logo?, metadata?}, organizationId?}`: for owners and admins.
pub async fn update(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let body = body(state, req, &["data", "organizationId"]).await?;
    let Some(Value::Object(data)) = body.get("data") else {
        return Err(Failure::validation("[body.data] Invalid input: expected object"));
    };
    let data = Fields::from(data.clone());
    data.only(&["name", "slug", "logo", "metadata"])?;
    let name = data.optional_string("name")?.map(validated_name).transpose()?;
    let new_slug = data.optional_string("slug")?.map(slug).transpose()?;
    let (logo, metadata) = (logo(&data)?, metadata(&data, "metadata")?);
    let org = named_id(&current, body.optional_string("organizationId")?, OrgError::NotFound)?;
    let org = state.accounts.update_owned_organization(&current, org, name, new_slug, logo, metadata, ip(&ctx)).await?;
    Ok(ok(&organization(&org)))
}

/// `POST delete` `{organizationId}`: for owners; the deleted organization is the answer.
pub async fn delete(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (token, current) = signed_in(state, &req).await?;
    let body = body(state, req, &["organizationId"]).await?;
    let org = named_id(&current, Some(body.string("organizationId")?), OrgError::NotFound)?;
    let deleted = state.accounts.delete_owned_organization(&current, token.hash(), org, ip(&ctx)).await?;
    Ok(ok(&organization(&deleted)))
}

/// `GET list`: the caller's organizations.
pub async fn list(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    extract::query_only(req.uri().query(), &[])?;
    let orgs = state.accounts.organizations_of(current.user.id);
    Ok(ok(&orgs.iter().map(|o| organization(o)).collect::<Vec<_>>()))
}

/// The organization a query names by `organizationSlug` or `organizationId`, or the session's active one.
fn queried(q: &impl Fn(&str) -> Option<String>) -> OrgRef {
    match (q("organizationSlug"), q("organizationId")) {
        (Some(slug), _) => OrgRef::Slug(slug),
        (None, Some(id)) => OrgRef::Id(id),
        (None, None) => OrgRef::Active,
    }
}

/// A caller who is no member of the organization they asked about stops working in it (as the plugin does).
async fn not_a_member(state: &AppState, token: &SessionToken, current: &Current) -> Failure {
    if current.session.active_organization().is_some()
        && let Err(u) = state.accounts.set_active_organization(&current.session, token.hash(), None).await
    {
        return u.into();
    }
    Failure::new(StatusCode::FORBIDDEN, "USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION", OrgError::NotAMember.to_string())
}

/// `GET get-full-organization`: the organization with its members and the invitations the caller may see;
/// `null` when none is named or active.
pub async fn get_full(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (token, current) = signed_in(state, &req).await?;
    let q = query(&req, &["organizationId", "organizationSlug", "membersLimit"])?;
    let limit = number(q("membersLimit"), "membersLimit")?;
    let org = match state.accounts.find_organization(&current.session, &queried(&q)) {
        Err(OrgError::NoActiveOrganization) => return Ok(ok(&Value::Null)),
        other => other?,
    };
    let full = match state.accounts.full_organization(&current, &org, limit) {
        Err(OrgError::NotAMember) => return Err(not_a_member(state, &token, &current).await),
        other => other?,
    };
    let answer = PluginOrganization {
        members: Some(full.members.iter().map(|(m, u)| member(m, Some(u))).collect()),
        invitations: Some(full.invitations.iter().map(|i| invitation(i)).collect()),
        teams: full.teams.as_ref().map(|teams| teams.iter().map(|t| PluginTeam::new(org.id, t)).collect()),
        ..organization(&full.organization)
    };
    Ok(ok(&answer))
}

/// `POST set-active` `{organizationId?: string | null, organizationSlug?}`: the organization, or `null` when
/// cleared (or none was named nor active).
pub async fn set_active(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (token, current) = signed_in(state, &req).await?;
    let body = body(state, req, &["organizationId", "organizationSlug"]).await?;
    let reference = match (body.nullable_string("organizationId")?, body.optional_string("organizationSlug")?) {
        (Some(None), _) => {
            state.accounts.set_active_organization(&current.session, token.hash(), None).await?;
            return Ok(ok(&Value::Null));
        }
        (Some(Some(id)), _) => OrgRef::Id(id.to_owned()),
        (None, Some(slug)) => OrgRef::Slug(slug.to_owned()),
        (None, None) => OrgRef::Active,
    };
    let org = match state.accounts.find_organization(&current.session, &reference) {
        Err(OrgError::NoActiveOrganization) => return Ok(ok(&Value::Null)),
        other => other?,
    };
    if state.accounts.acting_membership(&current, org.id).is_none() {
        return Err(not_a_member(state, &token, &current).await);
    }
    state.accounts.set_active_organization(&current.session, token.hash(), Some(org.id)).await?;
    Ok(ok(&organization(&org)))
}

// --- members ----------------------------------------------------------------------------------------------------

/// `GET list-members` `?limit&offset&organizationId|organizationSlug`: `{members, total}`, in joining order.
pub async fn list_members(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let q = query(&req, &["limit", "offset", "organizationId", "organizationSlug"])?;
    let (limit, offset) = (number(q("limit"), "limit")?, number(q("offset"), "offset")?.unwrap_or(0));
    let org = match queried(&q) {
        OrgRef::Slug(s) => state.accounts.find_organization(&current.session, &OrgRef::Slug(s))?.id,
        OrgRef::Id(id) => named_id(&current, Some(&id), OrgError::NoActiveOrganization)?,
        OrgRef::Active => named_id(&current, None, OrgError::NoActiveOrganization)?,
    };
    let (page, total) = state.accounts.member_page(&current, org, offset, limit)?;
    Ok(json_bytes(StatusCode::OK, member_page_json(&page, total)))
}

/// `GET get-active-member`: the caller's membership of the active organization, with their account.
pub async fn get_active_member(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    extract::query_only(req.uri().query(), &[])?;
    let org = named_id(&current, None, OrgError::NoActiveOrganization)?;
    let found = state.accounts.membership(org, current.user.id).ok_or(MemberError::MemberNotFound)?;
    Ok(ok(&member(&found, Some(&current.user))))
}

/// `GET get-active-member-role` `?userId&organizationId|organizationSlug`: `{role}` of the caller, or of another
/// member of an organization the caller belongs to.
pub async fn get_active_member_role(
    state: &AppState,
    _: Ctx,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let q = query(&req, &["userId", "organizationId", "organizationSlug"])?;
    let org = match queried(&q) {
        OrgRef::Slug(s) => state.accounts.find_organization(&current.session, &OrgRef::Slug(s))?.id,
        OrgRef::Id(id) => named_id(&current, Some(&id), OrgError::NoActiveOrganization)?,
        OrgRef::Active => named_id(&current, None, OrgError::NoActiveOrganization)?,
    };
    let me = state.accounts.acting_membership(&current, org).ok_or(OrgError::YouAreNotAMember)?;
    let roles = match q("userId") {
        None => me.roles.clone(),
        Some(id) => {
            let user = crate::domain::UserId::parse(&id);
            user.and_then(|u| state.accounts.membership(org, u)).ok_or(OrgError::YouAreNotAMember)?.roles.clone()
        }
    };
    Ok(ok(&MemberRole { role: roles.to_string() }))
}

/// `POST update-member-role` `{role, memberId, organizationId?}`: the updated membership.
pub async fn update_member_role(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let body = body(state, req, &["role", "memberId", "organizationId"]).await?;
    let member_id = MemberId::parse(body.string("memberId")?).ok_or(MemberError::MemberNotFound)?;
    let org = named_id(&current, body.optional_string("organizationId")?, OrgError::NoActiveOrganization)?;
    // The organization's own roles count too (`dynamic_roles`): a name is one of them when it defines it now.
    let new_roles = roles_with(body.get("role"), |names| state.accounts.parse_member_roles(org, names))?;
    let updated = state.accounts.set_member_roles(&current, org, member_id, new_roles, ip(&ctx)).await?;
    Ok(ok(&member(&updated, None)))
}

/// `POST remove-member` `{memberIdOrEmail, organizationId?}`: `{member}`, the membership that ended.
pub async fn remove_member(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (token, current) = signed_in(state, &req).await?;
    let body = body(state, req, &["memberIdOrEmail", "organizationId"]).await?;
    let raw = body.string("memberIdOrEmail")?;
    let target = if raw.contains('@') {
        Target::Email(Email::parse(raw).map_err(|_| MemberError::MemberNotFound)?)
    } else {
        Target::Member(MemberId::parse(raw).ok_or(MemberError::MemberNotFound)?)
    };
    let org = named_id(&current, body.optional_string("organizationId")?, OrgError::NoActiveOrganization)?;
    let removed = state.accounts.remove_member(&current, token.hash(), org, target, ip(&ctx)).await?;
    Ok(ok(&MemberEnded { member: member(&removed, None) }))
}

/// `POST leave` `{organizationId}`: the caller's membership that ended. The last owner cannot leave.
pub async fn leave(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (token, current) = signed_in(state, &req).await?;
    let body = body(state, req, &["organizationId"]).await?;
    let org = OrgId::parse(body.string("organizationId")?).ok_or(MemberError::MemberNotFound)?;
    let left = state.accounts.leave(&current, token.hash(), org, ip(&ctx)).await?;
    Ok(ok(&member(&left, None)))
}

/// `POST has-permission` `{permissions, organizationId?}`: `{error: null, success}` for the caller's role in
/// the organization.
pub async fn has_permission(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let body = body(state, req, &["permissions", "permission", "organizationId"]).await?;
    let wanted: &Map<String, Value> = match (body.get("permissions"), body.get("permission")) {
        (Some(Value::Object(w)), None) | (None, Some(Value::Object(w))) => w,
        _ => {
            return Err(Failure::validation(
                "[body] Invalid input: give exactly one of permissions or permission, an object",
            ));
        }
    };
    if !wanted.values().all(|actions| actions.as_array().is_some_and(|list| list.iter().all(Value::is_string))) {
        return Err(Failure::validation("[body.permissions] Invalid input: expected lists of action names"));
    }
    let org = named_id(&current, body.optional_string("organizationId")?, OrgError::NoActiveOrganization)?;
    let me = state.accounts.acting_membership(&current, org).ok_or_else(|| {
        Failure::new(
            StatusCode::UNAUTHORIZED,
            "USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION",
            OrgError::NotAMember.to_string(),
        )
    })?;
    let asked: Vec<(&str, &str)> = wanted
        .iter()
        .flat_map(|(resource, actions)| {
            actions.as_array().into_iter().flatten().filter_map(Value::as_str).map(move |a| (resource.as_str(), a))
        })
        .collect();
    // A resource asked with no action is granted when the role knows the resource (as the plugin's check); one
    // role must grant all of it, an organization's own roles (`dynamic_roles`) judged as the built-in ones.
    let judge = |knows: &dyn Fn(&str) -> bool, allows: &dyn Fn(&str, &str) -> bool| {
        wanted.iter().all(|(res, actions)| {
            let actions = actions.as_array().map_or(0, Vec::len);
            (actions > 0 || knows(res)) && asked.iter().filter(|(x, _)| x == res).all(|(_, a)| allows(res, a))
        })
    };
    let custom = state.accounts.custom_grants(&me);
    let success = !wanted.is_empty()
        && (me
            .roles
            .roles()
            .any(|r| judge(&|res| r.permissions().knows(res), &|res, a| r.permissions().allows(res, a)))
            || custom.iter().any(|g| judge(&|res| g.knows(res), &|res, a| g.allows(res, a))));
    Ok(ok(&PermissionCheck { error: (), success }))
}

// --- invitations -------------------------------------------------------------------------------------------------

/// `POST invite-member` `{email, role, organizationId?, resend?, teamId?}`: the invitation; its mail is in the
/// outbox.
pub async fn invite_member(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let body = body(state, req, &["email", "role", "organizationId", "resend", "teamId"]).await?;
    let teams = invited_teams(body.get("teamId"))?;
    let org = named_id(&current, body.optional_string("organizationId")?, OrgError::NotFound)?;
    let email = Email::parse(body.string("email")?).map_err(|_| super::fields::invalid_email())?;
    let new_roles = roles(body.get("role"))?;
    let resend = body.optional_bool("resend")?.unwrap_or(false);
    let sent = state.accounts.invite(&current, org, email, new_roles, resend, teams, ip(&ctx)).await?;
    Ok(ok(&invitation(&sent)))
}

/// invite-member's `teamId`: one id or a list (`None` when absent or `null`; `""` and `[]` name no team, as the
/// plugin reads them). An id holding a comma cannot be stored in the plugin's comma-joined field; one that is no
/// UUID names no team (refused as such once the organization's teams are looked at, in the plugin's order).
fn invited_teams(value: Option<&Value>) -> Result<Option<InvitedTeams>, Failure> {
    let ids: Vec<&str> = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) if s.is_empty() => Vec::new(),
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(list)) if list.iter().all(Value::is_string) => {
            list.iter().filter_map(Value::as_str).collect()
        }
        _ => return Err(Failure::validation("[body.teamId] Invalid input: expected string or array of strings")),
    };
    if ids.iter().any(|id| id.contains(',')) {
        return Err(Failure::bad_request("INVALID_TEAM_ID", "Team id contains a reserved character"));
    }
    let nobody = TeamId::from_bytes([0; 16]);
    Ok(Some(InvitedTeams::new(ids.into_iter().map(|id| TeamId::parse(id).unwrap_or(nobody)))))
}

fn invitation_id(raw: &str) -> Result<InvitationId, Failure> {
    InvitationId::parse(raw).ok_or_else(|| MemberError::InvitationNotFound.into())
}

/// `POST accept-invitation` `{invitationId}`: `{invitation, member}`; the session then works in the organization.
pub async fn accept_invitation(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (token, current) = signed_in(state, &req).await?;
    let body = body(state, req, &["invitationId"]).await?;
    let id = invitation_id(body.string("invitationId")?)?;
    let (accepted, joined) = state.accounts.accept_invitation(&current, token.hash(), id, ip(&ctx)).await?;
    Ok(ok(&InvitationAnswered { invitation: invitation(&accepted), member: Some(member(&joined, None)) }))
}

/// `POST reject-invitation` `{invitationId}`: `{invitation, member: null}`.
pub async fn reject_invitation(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let body = body(state, req, &["invitationId"]).await?;
    let id = invitation_id(body.string("invitationId")?)?;
    let rejected = state.accounts.reject_invitation(&current, id, ip(&ctx)).await?;
    Ok(ok(&InvitationAnswered { invitation: invitation(&rejected), member: None }))
}

/// `POST cancel-invitation` `{invitationId}`: the canceled invitation (owners and admins).
pub async fn cancel_invitation(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let body = body(state, req, &["invitationId"]).await?;
    let id = invitation_id(body.string("invitationId")?)?;
    let canceled = state.accounts.cancel_invitation(&current, id, ip(&ctx)).await?;
    Ok(ok(&invitation(&canceled)))
}

/// `GET get-invitation?id=`: an open invitation to the caller's address, with `organizationName`,
/// `organizationSlug` and `inviterEmail`.
pub async fn get_invitation(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let q = query(&req, &["id"])?;
    let id = invitation_id(&q("id").ok_or_else(|| Failure::validation("[query.id] Invalid input: expected string"))?)?;
    let (found, org, inviter) = state.accounts.invitation_for(&current, id)?;
    let answer = PluginInvitation {
        inviter_email: Some(inviter.email()),
        organization_name: Some(Some(org.name.as_str())),
        organization_slug: Some(org.slug.as_str()),
        ..invitation(&found)
    };
    Ok(ok(&answer))
}

/// `GET list-invitations?organizationId=`: the organization's invitations, for those who may invite.
pub async fn list_invitations(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let q = query(&req, &["organizationId"])?;
    let missing = Failure::bad_request("BAD_REQUEST", "Organization ID is required");
    let org = match q("organizationId") {
        Some(id) => OrgId::parse(&id).unwrap_or_else(|| OrgId::from_bytes([0; 16])),
        None => current.session.active_organization().ok_or(missing)?,
    };
    let all = state.accounts.invitations_of(&current, org)?;
    Ok(ok(&all.iter().map(|i| invitation(i)).collect::<Vec<_>>()))
}

/// `GET list-user-invitations`: the pending invitations to the caller's (verified) address, with
/// `organizationName`. The plugin's `email` parameter is for its server-side calls only: refused here.
pub async fn list_user_invitations(
    state: &AppState,
    _: Ctx,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    if extract::query_value(req.uri().query(), "email").is_some() {
        return Err(Failure::bad_request("BAD_REQUEST", "User email cannot be passed for client side API calls."));
    }
    extract::query_only(req.uri().query(), &[])?;
    let all = state.accounts.invitations_to(&current)?;
    let listed: Vec<PluginInvitation> = all
        .iter()
        .map(|(i, org)| PluginInvitation {
            organization_name: Some(org.as_ref().map(|o| o.name.as_str())),
            ..invitation(i)
        })
        .collect();
    Ok(ok(&listed))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::{Name, Timestamp, UserFields};

    /// `list-members` writes its answer by hand; the bytes must be those of the `Value` answer the other calls give
    /// for members with their accounts, whatever the names hold (quotes, backslashes, control characters, accents).
    #[test]
    fn a_member_page_written_by_hand_is_the_same_json_as_the_value() {
        let now = Timestamp::from_millis(1_700_000_000_123);
        let mut page = Vec::new();
        for (n, image) in [None, Some("https://example.com/a\"b.png"), None].into_iter().enumerate() {
            let user = User::from(UserFields {
                name: Name::from_trusted(format!("Ann {n} \"Quoted\" \u{e9} \\ \u{7}\u{1f}")),
                image: image.map(Into::into),
                ..User::fixture(&format!("ann{n}@example.com"), now).fields()
            });
            let roles = [
                MemberRoles::parse(["admin", "member"]).unwrap(),
                MemberRoles::one(crate::domain::OrgRole::Owner),
                MemberRoles::from_store(2, vec!["pm \"lead\" \u{e9}".into()]),
            ];
            let m = Membership::new(
                OrgId::new(),
                user.id,
                roles[n].clone(),
                Timestamp::from_millis(1_600_000_000_000 + n as i64),
            );
            page.push((Arc::new(m), Arc::new(user)));
        }
        for shown in [&page[..0], &page[..1], &page[..]] {
            let members: Vec<Value> =
                shown.iter().map(|(m, u)| serde_json::to_value(member(m, Some(u))).unwrap()).collect();
            let value = json!({"members": members, "total": 10_000});
            let by_hand = String::from_utf8(member_page_json(shown, 10_000)).unwrap();
            assert_eq!(by_hand, serde_json::to_string(&value).unwrap());
        }
    }
}
