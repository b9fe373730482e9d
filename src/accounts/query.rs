//! One engine for every list of users: `GET /api/admin/users` (and the console, which reads it), and the admin
//! plugin's `list-users`. Each front end parses its own query language into a [`UserQuery`]; the engine picks
//! where to read (every account in creation order, an organization's members, a range of the e-mail index),
//! applies the conditions, orders and windows the result. Read from the lock-free indexes; run it off the async
//! workers, since a condition no index serves passes over every account.

use std::borrow::Cow;
use std::sync::Arc;

use super::{Accounts, Place};
use crate::domain::{OrgId, User};

/// What users are searched by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextField {
    Email,
    Name,
    /// The e-mail or the name.
    EmailOrName,
}

/// How a search text is matched, ignoring case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    Contains,
    StartsWith,
    EndsWith,
}

/// A field compared as text (as the admin plugin compares everything).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Email,
    Name,
    Role,
    Banned,
    EmailVerified,
    Id,
}

/// A search: `needle` (lower-case) in `field`, as `operator` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Search {
    pub field: TextField,
    pub operator: Operator,
    pub needle: String,
}

/// A condition every listed user meets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// `field` as text is `value` (`equal`), or is not.
    Field { field: Field, value: String, equal: bool },
    /// In this organization, or (`None`) in none.
    Organization(Option<OrgId>),
}

/// The order of the result: creation (the default) or a field, either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Order {
    pub by: Option<Field>,
    pub descending: bool,
}

/// Which part of the result is wanted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// Up to `limit` users after `after` in creation order (a cursor: pages stay stable while users are created).
    /// Only with the creation order, ascending.
    After { after: Option<Place>, limit: usize },
    /// `limit` users (all with `None`) after skipping `offset`; the result counts every match.
    Offset { offset: usize, limit: Option<usize> },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserQuery {
    pub search: Option<Search>,
    pub filters: Vec<Filter>,
    pub order: Order,
    pub window: Window,
    /// A [`Window::After`] page also counts every match (`total`): free for every user or an e-mail prefix, one
    /// more pass over the candidates otherwise.
    pub count: bool,
}

/// One page of users.
#[derive(Debug, Default)]
pub struct Page {
    pub users: Vec<Arc<User>>,
    /// A [`Window::After`] page: more users match after it.
    pub more: bool,
    /// How many users match in all: a [`Window::Offset`] page always, a [`Window::After`] page when the query's
    /// `count` asks for it.
    pub total: usize,
}

impl UserQuery {
    /// Every user matches it.
    fn is_everyone(&self) -> bool {
        self.search.is_none() && self.filters.is_empty()
    }

    fn matches(&self, u: &User) -> bool {
        self.search.as_ref().is_none_or(|s| s.matches(u)) && self.filters.iter().all(|f| f.matches(u))
    }

    /// The e-mail prefix the e-mail index can serve, if the search is one.
    fn email_prefix(&self) -> Option<&str> {
        let s = self.search.as_ref()?;
        (s.field == TextField::Email && s.operator == Operator::StartsWith).then_some(s.needle.as_str())
    }

    /// The organization whose members are all the candidates, if a filter says so.
    fn organization(&self) -> Option<OrgId> {
        self.filters.iter().find_map(|f| match f {
            Filter::Organization(Some(org)) => Some(*org),
            _ => None,
        })
    }

    /// Runs the query: reads where an index narrows the candidates (an e-mail prefix, an organization), else
    /// passes over the accounts in creation order; a cursor page costs its own rows and the rows passed over,
    /// never the accounts before it.
    pub fn run(&self, accounts: &Accounts) -> Page {
        let users = &accounts.indexes.users;
        match self.window {
            Window::After { after, limit } => {
                if let Some(prefix) = self.email_prefix() {
                    // The e-mail index's range, put in creation order: as many rows as the prefix matches,
                    // however many accounts there are.
                    let mut found: Vec<Arc<User>> =
                        users.with_email_prefix(prefix).into_iter().filter(|u| self.matches(u)).collect();
                    found.sort_unstable_by_key(|u| (u.created_at, u.id));
                    let start = after.map_or(0, |after| found.partition_point(|u| (u.created_at, u.id) <= after));
                    let rest = &found[start..];
                    return Page {
                        users: rest.iter().take(limit).cloned().collect(),
                        more: rest.len() > limit,
                        total: found.len(),
                    };
                }
                let mut page = Page { users: Vec::with_capacity(limit.min(100)), ..Page::default() };
                let visit = |u: &Arc<User>| {
                    if !self.matches(u) {
                        return true;
                    }
                    if page.users.len() == limit {
                        page.more = true;
                        return false;
                    }
                    page.users.push(Arc::clone(u));
                    true
                };
                match self.organization() {
                    Some(org) => users.scan_org(org, after, visit),
                    None => users.scan(after, false, visit),
                }
                if self.count {
                    page.total = if self.is_everyone() { users.len() } else { self.count_matches(accounts) };
                }
                page
            }
            Window::Offset { offset, limit } => {
                let limit = limit.unwrap_or(usize::MAX);
                if self.is_everyone() && self.order.by.is_none() {
                    // The common case at any scale: no pass over the accounts at all.
                    let (mut users_page, mut skipped) = (Vec::new(), 0);
                    users.scan(None, self.order.descending, |u| {
                        if skipped < offset {
                            skipped += 1;
                        } else {
                            users_page.push(Arc::clone(u));
                        }
                        users_page.len() < limit
                    });
                    return Page { users: users_page, more: false, total: users.len() };
                }
                let mut found: Vec<Arc<User>> = match self.email_prefix() {
                    Some(prefix) => {
                        let mut found: Vec<Arc<User>> =
                            users.with_email_prefix(prefix).into_iter().filter(|u| self.matches(u)).collect();
                        found.sort_unstable_by_key(|u| (u.created_at, u.id));
                        if self.order.descending {
                            found.reverse();
                        }
                        found
                    }
                    None => {
                        let mut found = Vec::new();
                        users.scan(None, self.order.descending, |u| {
                            if self.matches(u) {
                                found.push(Arc::clone(u));
                            }
                            true
                        });
                        found
                    }
                };
                if let Some(field) = self.order.by {
                    found.sort_by(|a, b| field.of(a).cmp(&field.of(b)));
                    if self.order.descending {
                        found.reverse();
                    }
                }
                let total = found.len();
                Page { users: found.into_iter().skip(offset).take(limit).collect(), more: false, total }
            }
        }
    }
}

impl UserQuery {
    /// Every user that matches, wherever the page is.
    fn count_matches(&self, accounts: &Accounts) -> usize {
        let users = &accounts.indexes.users;
        let mut n = 0;
        let count = |u: &Arc<User>| {
            n += usize::from(self.matches(u));
            true
        };
        match self.organization() {
            Some(org) => users.scan_org(org, None, count),
            None => users.scan(None, false, count),
        }
        n
    }
}

impl Search {
    fn matches(&self, u: &User) -> bool {
        let test = |text: &str| self.operator.test(text, &self.needle);
        match self.field {
            TextField::Email => test(u.email()),
            TextField::Name => test(u.name()),
            TextField::EmailOrName => test(u.email()) || test(u.name()),
        }
    }
}

impl Filter {
    fn matches(&self, u: &User) -> bool {
        match self {
            Filter::Field { field, value, equal } => (field.of(u) == value.as_str()) == *equal,
            Filter::Organization(org) => u.organization_id == *org,
        }
    }
}

impl Field {
    /// The field's value as text; e-mails are stored lower-case, names as given.
    pub fn of(self, u: &User) -> Cow<'_, str> {
        match self {
            Self::Email => u.email().into(),
            Self::Name => u.name().into(),
            Self::Role => u.role.as_str().into(),
            Self::Banned => u.banned.to_string().into(),
            Self::EmailVerified => u.email_verified.to_string().into(),
            Self::Id => u.id.to_string().into(),
        }
    }
}

impl Operator {
    /// Case-insensitive; `needle` is already lower-case. ASCII needles (almost every search) are compared in
    /// place, so a pass over a million accounts allocates nothing.
    pub fn test(self, haystack: &str, needle: &str) -> bool {
        let (h, n) = (haystack.as_bytes(), needle.as_bytes());
        match self {
            Self::Contains if needle.is_ascii() => {
                n.is_empty() || h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n))
            }
            Self::StartsWith if needle.is_ascii() => h.get(..n.len()).is_some_and(|h| h.eq_ignore_ascii_case(n)),
            Self::EndsWith if needle.is_ascii() => {
                h.len().checked_sub(n.len()).is_some_and(|s| h[s..].eq_ignore_ascii_case(n))
            }
            Self::Contains => haystack.to_lowercase().contains(needle),
            Self::StartsWith => haystack.to_lowercase().starts_with(needle),
            Self::EndsWith => haystack.to_lowercase().ends_with(needle),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operators_ignore_case_for_ascii_and_other_needles() {
        assert!(Operator::Contains.test("Anna Lind", "na l"));
        assert!(Operator::Contains.test("anything", ""));
        assert!(Operator::StartsWith.test("Anna", "an") && !Operator::StartsWith.test("Anna", "nn"));
        assert!(Operator::EndsWith.test("Anna", "NA".to_lowercase().as_str()) && !Operator::EndsWith.test("a", "ab"));
        assert!(Operator::Contains.test("Ÿvonne Öst", "öst") && Operator::StartsWith.test("Ÿvonne", "ÿv"));
        assert!(Operator::EndsWith.test("ÅSA", "sa") && !Operator::EndsWith.test("ÅSA", "ås"));
    }
}
