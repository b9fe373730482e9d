//! One organization's members in joining order, for `list-members`' pages: a page costs what it holds, wherever
//! it starts, and the count of members and of owners is kept, not counted.
//!
//! A `BTreeMap` keeps the order but cannot start at the n-th entry: a page at `offset` 9,900 walked 9,900 entries
//! first (a quarter of the server's time on the last page of 10,000 members). Here the members sit in sorted runs
//! of at most [`RUN`] entries: a page skips whole runs by their length (40 runs at 10,000 members) and then reads
//! its entries. A member joining goes to the end of the last run (joining order is mostly time order); one
//! joining or leaving elsewhere moves at most a run's entries.

use std::sync::Arc;

use crate::domain::{Membership, Timestamp, UserId};

/// A member's place in joining order.
pub type Place = (Timestamp, UserId);

/// The longest run; a run that grows past it splits. A run that shrinks under a quarter of it merges into a
/// neighbour, so there are at most about `len / (RUN / 4)` runs whatever the order of changes.
const RUN: usize = 256;

#[derive(Default)]
pub struct Roster {
    /// Sorted runs, none empty; each run's entries come before the next run's. An entry is the pointer alone (8
    /// bytes): a search reads the place through it, one more memory access a step, where a copy of the place
    /// beside it took 24 bytes more for every membership of every organization.
    runs: Vec<Vec<Arc<Membership>>>,
    len: usize,
    owners: usize,
}

fn place(m: &Membership) -> Place {
    (m.created_at, m.user)
}

impl Roster {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many members are owners.
    pub fn owners(&self) -> usize {
        self.owners
    }

    /// The roster of `members` (one organization's, none twice), built from their sorted order: full runs, each
    /// allocated at its size (start-up).
    pub fn from_members(members: Vec<Arc<Membership>>) -> Self {
        let mut sorted = members;
        sorted.sort_unstable_by_key(|m| place(m));
        let owners = sorted.iter().filter(|m| m.roles.is_owner()).count();
        let len = sorted.len();
        let mut runs = Vec::with_capacity(len.div_ceil(RUN));
        let mut entries = sorted.into_iter();
        while entries.len() > 0 {
            runs.push(entries.by_ref().take(RUN).collect::<Vec<_>>());
        }
        Self { runs, len, owners }
    }

    /// The run `at` belongs in (the first whose last entry is not before it), or the last run.
    fn run_of(&self, at: &Place) -> usize {
        self.runs.partition_point(|run| run.last().is_some_and(|last| place(last) < *at)).min(self.runs.len() - 1)
    }

    /// Adds `member`, or replaces the member at its place; returns the one replaced.
    pub fn insert(&mut self, member: Arc<Membership>) -> Option<Arc<Membership>> {
        let at = place(&member);
        self.owners += usize::from(member.roles.is_owner());
        if self.runs.is_empty() {
            self.runs.push(Vec::with_capacity(RUN));
        }
        let r = self.run_of(&at);
        let run = &mut self.runs[r];
        match run.binary_search_by(|m| place(m).cmp(&at)) {
            Ok(i) => {
                let old = std::mem::replace(&mut run[i], member);
                self.owners -= usize::from(old.roles.is_owner());
                Some(old)
            }
            Err(i) => {
                run.insert(i, member);
                self.len += 1;
                if run.len() > RUN {
                    // Appending (the usual) leaves a full run behind it; anywhere else, two halves.
                    let keep = if i == run.len() - 1 { RUN } else { run.len() / 2 };
                    let rest = run.split_off(keep);
                    if keep == RUN {
                        // Full, and unlikely to grow again (joins go to the end): without this a run kept the
                        // room it doubled to for its last entry, twice its size, in every run of a roster.
                        run.shrink_to_fit();
                    }
                    self.runs.insert(r + 1, rest);
                }
                None
            }
        }
    }

    /// Removes the member at `at`; returns them.
    pub fn remove(&mut self, at: &Place) -> Option<Arc<Membership>> {
        if self.runs.is_empty() {
            return None;
        }
        let r = self.run_of(at);
        let i = self.runs[r].binary_search_by(|m| place(m).cmp(at)).ok()?;
        let old = self.runs[r].remove(i);
        self.len -= 1;
        self.owners -= usize::from(old.roles.is_owner());
        let short = self.runs[r].len();
        if short == 0 {
            self.runs.remove(r);
        } else if short < RUN / 4 {
            // Into the neighbour it fits with, the next one first.
            if r + 1 < self.runs.len() && short + self.runs[r + 1].len() <= RUN {
                let next = self.runs.remove(r + 1);
                self.runs[r].extend(next);
            } else if r > 0 && short + self.runs[r - 1].len() <= RUN {
                let this = self.runs.remove(r);
                self.runs[r - 1].extend(this);
            }
        }
        Some(old)
    }

    /// Up to `limit` members from the `offset`-th on, in joining order.
    pub fn page(&self, offset: usize, limit: usize) -> Vec<Arc<Membership>> {
        let mut page = Vec::with_capacity(limit.min(self.len.saturating_sub(offset)));
        self.visit(offset, limit, |m| page.push(Arc::clone(m)));
        page
    }

    /// Hands `each` up to `limit` members from the `offset`-th on; returns how many runs and entries it looked at
    /// (what a page costs: the runs before it by their length, then its own entries).
    fn visit(&self, mut offset: usize, limit: usize, mut each: impl FnMut(&Arc<Membership>)) -> usize {
        let (mut looked, mut left) = (0, limit);
        for run in &self.runs {
            if left == 0 {
                break;
            }
            looked += 1;
            if offset >= run.len() {
                offset -= run.len();
                continue;
            }
            for m in run[offset..].iter().take(left) {
                each(m);
                looked += 1;
                left -= 1;
            }
            offset = 0;
        }
        looked
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::domain::{OrgId, OrgRole};

    /// The guard on `list-members`' cost at scale, counted rather than timed: the last page of 10,000 members
    /// looks at its 100 entries and the runs before it, never at the 9,900 members it skips.
    #[test]
    fn a_page_looks_at_its_members_and_the_runs_before_it_only() {
        let org = OrgId::new();
        let mut roster = Roster::default();
        for n in 0..10_000 {
            roster.insert(Membership::fixture(org, UserId::new(), n, OrgRole::Member));
        }
        let runs = roster.runs.len();
        assert!(runs <= 10_000 / RUN + 1, "{runs} runs for joins in time order");
        for offset in [0, 5_000, 9_900] {
            let mut got = 0;
            let looked = roster.visit(offset, 100, |_| got += 1);
            assert_eq!(got, 100);
            assert!(looked <= 100 + runs, "offset {offset}: looked at {looked}");
        }
        assert_eq!(roster.page(9_990, 100).len(), 10);
        assert!(roster.page(10_000, 100).is_empty());
        // Members leaving from everywhere but every 50th: the runs merge, and a page still skips by runs.
        let places: Vec<Place> = roster.runs.iter().flatten().map(|m| place(m)).collect();
        for (n, at) in places.iter().enumerate() {
            if n % 50 != 0 {
                roster.remove(at);
            }
        }
        assert_eq!(roster.len(), 200);
        assert!(roster.runs.len() <= 200 / (RUN / 4) + 1, "{} runs left for 200 members", roster.runs.len());
        assert!(roster.visit(190, 10, |_| ()) <= 10 + roster.runs.len());
    }

    /// A roster grown by joins in time order, and one built at start-up, hold their entries and little spare room
    /// (a run that had doubled its room for its 257th entry kept it after the split: twice the bytes), and an
    /// entry is a pointer and nothing else.
    #[test]
    fn runs_keep_no_room_they_will_not_use() {
        let org = OrgId::new();
        let members: Vec<_> =
            (0..10_000).map(|n| Membership::fixture(org, UserId::new(), n, OrgRole::Member)).collect();
        let mut grown = Roster::default();
        members.iter().for_each(|m| drop(grown.insert(Arc::clone(m))));
        let (built, bytes) =
            crate::alloc_count::bytes_in(|| Roster::from_members(members.iter().rev().cloned().collect()));
        // A pointer an entry, and the runs' own headers: it was 32 bytes an entry with a copy of each place.
        assert!(bytes < 10_000 * 9, "{bytes} bytes for 10,000 members");
        for roster in [&grown, &built] {
            let room: usize = roster.runs.iter().map(Vec::capacity).sum();
            assert!(room <= 10_000 + 2 * RUN, "room for {room} entries");
            assert_eq!(roster.len(), 10_000);
        }
        let order = |r: &Roster| r.page(0, usize::MAX).iter().map(|m| m.user).collect::<Vec<_>>();
        assert_eq!(order(&built), order(&grown));
        assert_eq!(built.runs.len(), 10_000usize.div_ceil(RUN));
    }

    /// Joins, role changes and departures in a scrambled order: the roster says what an ordered map says.
    #[test]
    fn the_roster_follows_an_ordered_map_through_any_changes() {
        let org = OrgId::new();
        let users: Vec<UserId> = (0..3_000).map(|_| UserId::new()).collect();
        let (mut roster, mut model) = (Roster::default(), BTreeMap::new());
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for step in 0..20_000 {
            let n = (next() % 3_000) as usize;
            // Joining times collide often, so the user id decides the order among equals.
            let at = (n % 700) as i64;
            let key = (Timestamp::from_millis(at), users[n]);
            if next() % 3 == 0 {
                assert_eq!(roster.remove(&key).map(|m| m.user), model.remove(&key).map(|m: Arc<Membership>| m.user));
            } else {
                let role = [OrgRole::Owner, OrgRole::Admin, OrgRole::Member][(next() % 3) as usize];
                let m = Membership::fixture(org, users[n], at, role);
                let old = roster.insert(Arc::clone(&m)).map(|m| m.roles.clone());
                assert_eq!(old, model.insert(key, m).map(|m| m.roles.clone()));
            }
            assert_eq!(roster.len(), model.len());
            if step % 500 == 0 {
                assert_eq!(roster.owners(), model.values().filter(|m| m.roles.is_owner()).count());
                let (offset, limit) = ((next() % 1_500) as usize, (next() % 300) as usize);
                let want: Vec<UserId> = model.values().skip(offset).take(limit).map(|m| m.user).collect();
                assert_eq!(roster.page(offset, limit).iter().map(|m| m.user).collect::<Vec<_>>(), want);
                assert!(roster.runs.iter().all(|run| !run.is_empty() && run.len() <= RUN));
                let all: Vec<Place> = roster.runs.iter().flatten().map(|m| place(m)).collect();
                assert!(all.windows(2).all(|w| w[0] < w[1]));
            }
        }
    }
}
