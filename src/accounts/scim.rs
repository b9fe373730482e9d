//! SCIM provisioning, the facade's side: an organization's tokens (its owner's or an administrator's), the bearer
//! check of each SCIM call, and the Users operations: the directory's records read from the store, checked and
//! rendered here ([`crate::scim`]), the accounts changed through the users actor in one commit each.

use std::sync::Arc;

use serde_json::Value;

use super::{Accounts, Current};
use crate::actors::users::{NewUser, ScimChange, ScimError};
use crate::domain::{OrgId, Password, PasswordContext, Timestamp, User, UserId};
use crate::hashing::OnFile;
pub use crate::scim::{BearerError, Caller as ScimCaller, Fault, Paging, Scopes as ScimScopes, TokenError, TokenView};
use crate::scim::{filter, list_response, page_response, user};

/// The SCIM discovery documents and the list answer, for the front end.
pub mod discovery {
    pub use crate::scim::projection::Projection;
    pub use crate::scim::{SEARCH_SCHEMA, find, list_response, resource_types, schemas, service_provider_config};
}
use crate::store::{ScimLookup, ScimUserRecordV1, Store, StoreError};

/// Why a token call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScimTokenError {
    #[error("organization not found")]
    OrganizationNotFound,
    /// Neither an administrator nor an owner of the organization.
    #[error("only the organization's owners and administrators manage its SCIM tokens")]
    Forbidden,
    #[error(transparent)]
    Token(#[from] TokenError),
}

pub(super) fn unavailable(e: impl std::fmt::Display) -> Fault {
    tracing::warn!(error = %e, "SCIM call failed on the store");
    Fault::status(503, "The service is temporarily unavailable")
}

/// A list's filter, parsed: a malformed one is an `invalidFilter`.
pub(super) fn scim_filter(filter: Option<&str>) -> Result<Option<filter::Filter>, Fault> {
    filter.map(|f| filter::parse(f).map_err(|e| Fault::bad("invalidFilter", e.0))).transpose()
}

fn not_found() -> Fault {
    Fault::status(404, "SCIM User not found")
}

impl From<ScimError> for Fault {
    fn from(e: ScimError) -> Self {
        match e {
            ScimError::EmailTaken => Fault { status: 409, scim_type: Some("uniqueness"), detail: e.to_string() },
            ScimError::UserNotFound | ScimError::OrganizationNotFound => not_found(),
            ScimError::LastAdmin => Fault { status: 409, scim_type: Some("mutability"), detail: e.to_string() },
            ScimError::Unavailable(u) => unavailable(u),
        }
    }
}

impl Accounts {
    /// The organization `org` when `current` may manage its SCIM tokens: an administrator (on their own session),
    /// or an owner of it.
    fn scim_token_manager(&self, current: &Current, org: OrgId) -> Result<(), ScimTokenError> {
        self.indexes.orgs.get(org).ok_or(ScimTokenError::OrganizationNotFound)?;
        let owner = self.indexes.members.get(org, current.user.id).is_some_and(|m| m.roles.is_owner());
        if current.administrator().is_some() || (owner && !current.is_impersonation()) {
            Ok(())
        } else {
            Err(ScimTokenError::Forbidden)
        }
    }

    pub async fn scim_tokens(&self, current: &Current, org: OrgId) -> Result<Vec<TokenView>, ScimTokenError> {
        self.scim_token_manager(current, org)?;
        Ok(self.scim.list(org).await?)
    }

    /// Makes a SCIM token for `org`: the token is in this answer only. Audited.
    pub async fn create_scim_token(
        &self,
        current: &Current,
        org: OrgId,
        scopes: ScimScopes,
        expires_at: Option<Timestamp>,
        ip: &str,
    ) -> Result<(TokenView, String), ScimTokenError> {
        self.scim_token_manager(current, org)?;
        Ok(self.scim.create(org, scopes, expires_at, current.actor(), ip).await?)
    }

    /// Revokes one of `org`'s tokens: refused from then on, on every node. Audited.
    pub async fn revoke_scim_token(
        &self,
        current: &Current,
        org: OrgId,
        id: uuid::Uuid,
        ip: &str,
    ) -> Result<(), ScimTokenError> {
        self.scim_token_manager(current, org)?;
        Ok(self.scim.revoke(org, id, current.actor(), ip).await?)
    }

    /// The caller a SCIM call's bearer token stands for: a live token of an organization that still exists.
    pub async fn scim_caller(&self, presented: Option<&str>) -> Result<ScimCaller, BearerError> {
        let caller = self.scim.authenticate(presented.ok_or(BearerError::Missing)?).await?;
        self.indexes.orgs.get(caller.org).ok_or(BearerError::Invalid)?;
        Ok(caller)
    }

    pub(super) async fn scim_read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, Fault> {
        let store = Arc::clone(&self.store);
        tokio::task::spawn_blocking(move || f(&store)).await.map_err(unavailable)?.map_err(unavailable)
    }

    /// The caller's organization's records of accounts that still exist (an administrator may have removed one).
    pub(super) async fn scim_records(&self, caller: &ScimCaller) -> Result<Vec<ScimUserRecordV1>, Fault> {
        let org = caller.org.to_bytes();
        let records = self.scim_read(move |s| s.scim_users(Some(org))).await?;
        Ok(self.scim_existing(records))
    }

    /// The caller's organization's records that `lookup` finds, from the stores' index (one key, not the
    /// organization's every record), of accounts that still exist.
    async fn scim_records_by(&self, caller: &ScimCaller, lookup: ScimLookup) -> Result<Vec<ScimUserRecordV1>, Fault> {
        let org = caller.org.to_bytes();
        let records = self.scim_read(move |s| s.scim_users_by(org, &lookup)).await?;
        Ok(self.scim_existing(records))
    }

    fn scim_existing(&self, mut records: Vec<ScimUserRecordV1>) -> Vec<ScimUserRecordV1> {
        records.retain(|r| self.indexes.users.get(UserId::from_bytes(r.user)).is_some());
        // The order of creation, then id: stable across pages.
        records.sort_by_key(|r| (r.created_at_ms, r.user));
        records
    }

    /// The caller's organization's record of the account whose SCIM id is `id`, and the account.
    async fn scim_record(&self, caller: &ScimCaller, id: &str) -> Result<(ScimUserRecordV1, Arc<User>), Fault> {
        let user = UserId::parse(id).ok_or_else(not_found)?;
        let account = self.indexes.users.get(user).ok_or_else(not_found)?;
        let (org, key) = (caller.org.to_bytes(), user.to_bytes());
        let record = self.scim_read(move |s| s.scim_user(org, key)).await?.ok_or_else(not_found)?;
        Ok((record, account))
    }

    /// 409 when another account of the organization's directory has `input`'s userName or externalId.
    async fn scim_uniqueness(
        &self,
        caller: &ScimCaller,
        input: &user::UserInput,
        except: Option<[u8; 16]>,
    ) -> Result<(), Fault> {
        let taken = |records: Vec<ScimUserRecordV1>| records.iter().any(|r| Some(r.user) != except);
        let conflict = |detail: &str| Fault { status: 409, scim_type: Some("uniqueness"), detail: detail.into() };
        if taken(self.scim_records_by(caller, ScimLookup::user_name(&input.user_name)).await?) {
            return Err(conflict("userName is taken"));
        }
        if let Some(external_id) = &input.external_id
            && taken(self.scim_records_by(caller, ScimLookup::external_id(external_id)).await?)
        {
            return Err(conflict("externalId is taken"));
        }
        Ok(())
    }

    pub(super) fn scim_allows(caller: &ScimCaller, needed: ScimScopes) -> Result<(), Fault> {
        if caller.scopes.allows(needed) {
            Ok(())
        } else {
            Err(Fault::status(403, format!("the token lacks the scope {}", needed.names().join(" "))))
        }
    }

    /// `POST /Users`: provisions an account (no password unless the body sets one, which is checked as every new
    /// password is), its membership and the directory's record in one commit. Answers the resource.
    pub async fn scim_create_user(
        &self,
        caller: &ScimCaller,
        body: &Value,
        base: &str,
        ip: &str,
    ) -> Result<Value, Fault> {
        Self::scim_allows(caller, ScimScopes::USERS_WRITE)?;
        let input = user::parse(body)?;
        self.scim_uniqueness(caller, &input, None).await?;
        if self.indexes.users.by_email(&input.email).is_some() {
            return Err(ScimError::EmailTaken.into());
        }
        let password_hash = match user::password(body)? {
            None => String::new(),
            Some(password) => {
                let context =
                    PasswordContext { email: input.email.as_str(), name: input.name.as_str(), second_factor: false };
                self.vet_password(&password, context).await.map_err(|e| Fault::bad("invalidValue", e.to_string()))?;
                self.hasher.hash(password).await.map_err(unavailable)?
            }
        };
        let now = Timestamp::now();
        let record = user::record(caller.org.to_bytes(), [0; 16], &input, now, now);
        let new = NewUser {
            name: input.name.clone(),
            email: input.email.clone(),
            image: None,
            role: self.roles.default_role(),
            password_hash,
            // SCIM's userName is the e-mail address on @better-auth/scim's wire, not better-auth's username.
            username: None,
            display_username: None,
        };
        let via = format!("SCIM token {}", caller.token);
        let made = self
            .actors
            .users
            .scim_provision(caller.org, new, record.clone(), caller.on_behalf_of, via, ip.to_owned())
            .await?;
        Ok(user::render(&ScimUserRecordV1 { user: made.id.to_bytes(), ..record }, base))
    }

    pub async fn scim_get_user(&self, caller: &ScimCaller, id: &str, base: &str) -> Result<Value, Fault> {
        Self::scim_allows(caller, ScimScopes::USERS_READ)?;
        let (record, _) = self.scim_record(caller, id).await?;
        Ok(user::render(&record, base))
    }

    /// A page of the caller's organization's Users that `filter` matches (all of them without one).
    pub async fn scim_list_users(
        &self,
        caller: &ScimCaller,
        filter: Option<&str>,
        paging: Paging,
        base: &str,
    ) -> Result<Value, Fault> {
        Self::scim_allows(caller, ScimScopes::USERS_READ)?;
        let Some(filter) = scim_filter(filter)? else {
            // Nothing to test: only the page is rendered.
            let records = self.scim_records(caller).await?;
            let page = paging.page(&records).map(|r| user::render(r, base)).collect();
            return Ok(page_response(records.len(), page, paging));
        };
        Ok(list_response(self.scim_matched_users(caller, Some(&filter), base).await?, paging))
    }

    pub(super) async fn scim_matched_users(
        &self,
        caller: &ScimCaller,
        filter: Option<&filter::Filter>,
        base: &str,
    ) -> Result<Vec<Value>, Fault> {
        // The lookups directories send before each create (`userName eq`, `externalId eq`, alone or as a term of
        // an `and`) read the stores' index instead of the organization's every record; the whole filter still
        // decides on what they find.
        let lookup = filter.and_then(|f| {
            (f.required_eq("userName").map(ScimLookup::user_name))
                .or_else(|| f.required_eq("externalId").map(ScimLookup::external_id))
        });
        let records = match lookup {
            Some(lookup) => self.scim_records_by(caller, lookup).await?,
            None => self.scim_records(caller).await?,
        };
        Ok(records
            .iter()
            .map(|r| user::render(r, base))
            .filter(|resource| filter.is_none_or(|f| f.matches(resource)))
            .collect())
    }

    /// `POST /.search` (RFC 7644 §3.4.3): a page of every resource type the token may read (Users, then Groups
    /// where the server has them) that `filter` matches; an attribute one type lacks matches none of its resources.
    pub async fn scim_search(
        &self,
        caller: &ScimCaller,
        filter: Option<&str>,
        paging: Paging,
        base: &str,
    ) -> Result<Value, Fault> {
        let (users, groups) =
            (caller.scopes.allows(ScimScopes::USERS_READ), caller.scopes.allows(ScimScopes::GROUPS_READ));
        if !users && !groups {
            Self::scim_allows(caller, ScimScopes::USERS_READ)?;
        }
        let filter = scim_filter(filter)?;
        let mut matched = Vec::new();
        if users {
            matched.extend(self.scim_matched_users(caller, filter.as_ref(), base).await?);
        }
        if groups && self.scim_has_groups() {
            matched.extend(self.scim_matched_groups(caller, filter.as_ref(), base).await?);
        }
        Ok(list_response(matched, paging))
    }

    /// `PUT /Users/{id}`: the body replaces the resource.
    pub async fn scim_replace_user(
        &self,
        caller: &ScimCaller,
        id: &str,
        body: &Value,
        base: &str,
        ip: &str,
    ) -> Result<Value, Fault> {
        Self::scim_allows(caller, ScimScopes::USERS_WRITE)?;
        let (record, account) = self.scim_record(caller, id).await?;
        let input = user::parse(body)?;
        let password = user::password(body)?;
        self.scim_write(caller, record, account, input, password, base, ip).await
    }

    /// `PATCH /Users/{id}`: the operations applied to the resource, which is then checked as a replacement is.
    pub async fn scim_patch_user(
        &self,
        caller: &ScimCaller,
        id: &str,
        body: &Value,
        base: &str,
        ip: &str,
    ) -> Result<Value, Fault> {
        Self::scim_allows(caller, ScimScopes::USERS_WRITE)?;
        let (record, account) = self.scim_record(caller, id).await?;
        let mut resource = user::render(&record, base);
        user::patch(&mut resource, body)?;
        let input = user::parse(&resource)?;
        let password = user::password(&resource)?;
        self.scim_write(caller, record, account, input, password, base, ip).await
    }

    /// The hash of the password a PUT or PATCH sets on `account`, checked as every new password is (length, the
    /// breached list, the words of the account's name and address); `None` when none is set, or when it is the
    /// password the account has already (a directory that pushes the password with every profile update, as
    /// Okta's password sync may, would otherwise end the user's sessions each time). A service administrator's
    /// password is never set by an organization's directory: that would make the token's holder an administrator.
    async fn scim_new_password(
        &self,
        account: &User,
        input: &user::UserInput,
        password: Option<Password>,
    ) -> Result<Option<String>, Fault> {
        let Some(password) = password else { return Ok(None) };
        if account.role.is_admin() {
            return Err(Fault::status(403, "an administrator's password is not set by an organization's directory"));
        }
        let stored = account.password_hash().as_phc().into_owned();
        if !stored.is_empty() {
            let users = &self.indexes.users;
            let on_file = OnFile { legacy: users.legacy_hashes() > 0, argon2: users.argon2_costs() };
            if self.hasher.verify(password.clone(), Some(stored), on_file).await.map_err(unavailable)? {
                return Ok(None);
            }
        }
        let context = PasswordContext {
            email: account.email(),
            name: input.name.as_str(),
            second_factor: account.has_second_factor(),
        };
        self.vet_password(&password, context).await.map_err(|e| Fault::bad("invalidValue", e.to_string()))?;
        Ok(Some(self.hasher.hash(password).await.map_err(unavailable)?))
    }

    #[allow(clippy::too_many_arguments)]
    async fn scim_write(
        &self,
        caller: &ScimCaller,
        record: ScimUserRecordV1,
        account: Arc<User>,
        input: user::UserInput,
        password: Option<Password>,
        base: &str,
        ip: &str,
    ) -> Result<Value, Fault> {
        self.scim_uniqueness(caller, &input, Some(record.user)).await?;
        let password_hash = self.scim_new_password(&account, &input, password).await?;
        let updated = user::record(
            record.org,
            record.user,
            &input,
            Timestamp::from_millis(record.created_at_ms),
            Timestamp::now(),
        );
        // The account's address stays the one it was provisioned with: a directory changing it would otherwise
        // move the account to an address nobody proved (the record keeps what the directory says).
        let name = (input.name.as_str() != account.name()).then(|| input.name.clone());
        let change = ScimChange {
            org: caller.org,
            user: account.id,
            name,
            password_hash,
            record: updated.clone(),
            by: caller.on_behalf_of,
            via: format!("SCIM token {}", caller.token),
        };
        self.actors.users.scim_change(change, ip.to_owned()).await?;
        Ok(user::render(&updated, base))
    }

    /// `DELETE /Users/{id}`: the membership and the directory's record end; the account too when no other
    /// organization has it.
    pub async fn scim_delete_user(&self, caller: &ScimCaller, id: &str, ip: &str) -> Result<(), Fault> {
        Self::scim_allows(caller, ScimScopes::USERS_WRITE)?;
        let (_, account) = self.scim_record(caller, id).await?;
        let via = format!("SCIM token {}", caller.token);
        Ok(self.actors.users.scim_deprovision(caller.org, account.id, caller.on_behalf_of, via, ip.to_owned()).await?)
    }
}
