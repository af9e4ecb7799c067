//! The broker-side `sticky` task assignor of KIP-1071 streams groups (Kafka 4.4's
//! `StickyTaskAssignor`), as a pure function.
//!
//! Actives are placed in three passes: back to the previous active owner, then to a member
//! that has the task's state (previous standby, or reported changelog offsets), then to the
//! least-loaded process. Standbys follow the same preference (previous active owner, previous
//! standby holder), and whatever is left goes to the least-loaded process lacking the task.
//! Sticky placements are capped by per-member quotas so the result stays balanced.
//!
//! Everything is ordered by member id / process id / task id, so the output depends only on the
//! input's content, never on its order or on hash iteration.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BTreeSet};

/// subtopology id -> partitions (task ids)
pub type TaskIds = BTreeMap<String, BTreeSet<i32>>;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AssignedTasks {
    pub active: TaskIds,
    pub standby: TaskIds,
}

#[derive(Debug, Clone)]
pub struct AssignorMember {
    pub member_id: String,
    pub process_id: String,
    pub current: AssignedTasks,
    /// (subtopology, partition) -> offset sum
    pub task_offsets: BTreeMap<(String, i32), i64>,
}

#[derive(Debug, Clone)]
pub struct AssignorSubtopology {
    pub id: String,
    pub tasks: i32,
    pub stateful: bool,
}

/// A task as (index of its subtopology in id order, partition). The derived ordering is
/// therefore (subtopology id, partition).
type Task = (usize, i32);

/// Orders tasks by (partition, subtopology), the order of the sticky passes: assignments
/// produced by the range-like fallback pair equal partitions, so this visits them together.
fn by_partition(task: &Task) -> (i32, usize) {
    (task.1, task.0)
}

struct MemberState {
    process: usize,
    /// Active plus standby tasks assigned so far.
    tasks: usize,
    active: Vec<Task>,
    standby: Vec<Task>,
}

struct ProcessState {
    /// Member indexes, ascending, hence in member id order.
    members: Vec<usize>,
    /// Active plus standby tasks assigned to all members so far.
    tasks: usize,
    /// Every task on the process, as active or standby: a process never holds a task twice.
    holds: BTreeSet<Task>,
}

impl ProcessState {
    /// Compares loads (tasks per member) exactly, by cross-multiplying instead of dividing.
    fn cmp_load(&self, other: &ProcessState) -> Ordering {
        (self.tasks * other.members.len()).cmp(&(other.tasks * self.members.len()))
    }
}

/// A per-member task quota: ceil(tasks / members). A member that reaches it exactly leaves
/// the pool and the quota is recomputed over the tasks and members that remain, so the members
/// still in the pool can absorb what is left evenly.
///
/// Leaving members hold at least the average, so the quota never rises and a member that left
/// can never hit it again: no need to remember who left.
struct Quota {
    tasks: usize,
    members: usize,
    per_member: usize,
}

impl Quota {
    fn new(tasks: usize, members: usize) -> Self {
        Quota {
            tasks,
            members,
            per_member: tasks.div_ceil(members.max(1)),
        }
    }

    fn has_room(&self, count: usize) -> bool {
        count < self.per_member
    }

    /// Called after a member received a task and now has `count` tasks.
    fn record(&mut self, count: usize) {
        if count != self.per_member {
            return;
        }
        self.tasks = self.tasks.saturating_sub(count);
        self.members -= 1;
        self.per_member = if self.members == 0 {
            0
        } else {
            self.tasks.div_ceil(self.members)
        };
    }
}

struct State {
    members: Vec<MemberState>,
    processes: Vec<ProcessState>,
    prev_active: BTreeMap<Task, usize>,
    /// Members that have state for a task: previous standbys first, then by offset sum
    /// (highest first), then by member id.
    prev_standby: BTreeMap<Task, Vec<usize>>,
    active_quota: Quota,
    total_quota: Quota,
}

impl State {
    fn assign(&mut self, member: usize, task: Task, active: bool) {
        let m = &mut self.members[member];
        m.tasks += 1;
        if active {
            m.active.push(task);
        } else {
            m.standby.push(task);
        }
        let count = m.tasks;
        let p = &mut self.processes[m.process];
        p.tasks += 1;
        p.holds.insert(task);
        if active {
            self.active_quota.record(count);
        }
        self.total_quota.record(count);
    }

    fn process_holds(&self, member: usize, task: &Task) -> bool {
        self.processes[self.members[member].process]
            .holds
            .contains(task)
    }

    /// The least-loaded member among the task's previous standby candidates, skipping those
    /// whose process already holds the task when `skip_holders`. Like Kafka, the best-ranked
    /// candidate is kept unless a later one is strictly less loaded on both its process and
    /// its own task count, so state freshness wins over small load differences.
    fn least_loaded_candidate(&self, task: &Task, skip_holders: bool) -> Option<usize> {
        let mut best: Option<usize> = None;
        for &m in self.prev_standby.get(task).into_iter().flatten() {
            if skip_holders && self.process_holds(m, task) {
                continue;
            }
            let better = match best {
                None => true,
                Some(b) => {
                    let (pm, pb) = (self.members[m].process, self.members[b].process);
                    self.processes[pm].cmp_load(&self.processes[pb]) == Ordering::Less
                        && self.members[m].tasks < self.members[b].tasks
                }
            };
            if better {
                best = Some(m);
            }
        }
        best
    }

    /// The least-loaded process (ties: lowest process id) among those accepted by `eligible`.
    fn least_loaded_process(&self, eligible: impl Fn(&ProcessState) -> bool) -> Option<usize> {
        (0..self.processes.len())
            .filter(|&p| eligible(&self.processes[p]))
            .min_by(|&a, &b| self.processes[a].cmp_load(&self.processes[b]))
    }

    /// The member of a process with the fewest tasks (ties: lowest member id).
    fn least_loaded_member(&self, process: usize) -> usize {
        *self.processes[process]
            .members
            .iter()
            .min_by_key(|&&m| (self.members[m].tasks, m))
            .expect("a process exists only through its members")
    }

    fn assign_actives(&mut self, mut tasks: Vec<Task>) {
        tasks.sort_by_key(by_partition);

        // (a) Back to the previous active owner while it is under the active quota.
        tasks.retain(|task| match self.prev_active.get(task) {
            Some(&m) if self.active_quota.has_room(self.members[m].tasks) => {
                self.assign(m, *task, true);
                false
            }
            _ => true,
        });

        // (b) To the least-loaded member that has the task's state, if under the quota.
        tasks.retain(|task| match self.least_loaded_candidate(task, false) {
            Some(m) if self.active_quota.has_room(self.members[m].tasks) => {
                self.assign(m, *task, true);
                false
            }
            _ => true,
        });

        // (c) The rest, in (subtopology, partition) order so that a fresh group gets a
        // range-like assignment, to the least-loaded process; no quota check.
        tasks.sort();
        for task in tasks {
            let process = self
                .least_loaded_process(|_| true)
                .expect("checked by assign: there are members");
            let member = self.least_loaded_member(process);
            self.assign(member, task, true);
        }
    }

    fn assign_standbys(&mut self, mut tasks: Vec<Task>, replicas: u32) {
        tasks.sort_by_key(|task| Reverse(by_partition(task)));
        let mut leftovers: Vec<(Task, u32)> = Vec::new();

        for task in tasks {
            for placed in 0..replicas {
                let prev_active = self.prev_active.get(&task).copied().filter(|&m| {
                    !self.process_holds(m, &task)
                        && self.total_quota.has_room(self.members[m].tasks)
                });
                let member = prev_active.or_else(|| {
                    self.least_loaded_candidate(&task, true)
                        .filter(|&m| self.total_quota.has_room(self.members[m].tasks))
                });
                match member {
                    Some(m) => self.assign(m, task, false),
                    None => {
                        leftovers.push((task, replicas - placed));
                        break;
                    }
                }
            }
        }

        // Leftover replicas go to the least-loaded processes lacking the task, with no quota
        // check. When no process is left, the replicas are dropped: too few processes for the
        // configured replication is a configuration issue, not an assignment failure (Kafka
        // logs "Unable to assign k of n standby tasks"; callers can detect the shortfall).
        leftovers.sort_by_key(|&(task, _)| Reverse(task));
        for (task, missing) in leftovers {
            for _ in 0..missing {
                let Some(process) = self.least_loaded_process(|p| !p.holds.contains(&task)) else {
                    break;
                };
                let member = self.least_loaded_member(process);
                self.assign(member, task, false);
            }
        }
    }
}

/// The target assignment of every member (members with nothing get an empty AssignedTasks entry).
pub fn assign(
    members: &[AssignorMember],
    subtopologies: &[AssignorSubtopology],
    standby_replicas: u32,
) -> Result<BTreeMap<String, AssignedTasks>, String> {
    // Sorted inputs: indexes then follow id order, which makes every tie-break deterministic.
    let mut subs: Vec<&AssignorSubtopology> = subtopologies.iter().collect();
    subs.sort_by(|a, b| a.id.cmp(&b.id));
    let mut sorted_members: Vec<&AssignorMember> = members.iter().collect();
    sorted_members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
    if let Some(w) = subs.windows(2).find(|w| w[0].id == w[1].id) {
        return Err(format!("Duplicate subtopology {}.", w[0].id));
    }
    if let Some(w) = sorted_members
        .windows(2)
        .find(|w| w[0].member_id == w[1].member_id)
    {
        return Err(format!("Duplicate member {}.", w[0].member_id));
    }

    let sub_index: BTreeMap<&str, usize> = subs
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    // Resolves a (subtopology, partition) pair, dropping tasks that no longer exist.
    let resolve = |sub: &str, partition: i32| -> Option<Task> {
        let &i = sub_index.get(sub)?;
        (0..subs[i].tasks)
            .contains(&partition)
            .then_some((i, partition))
    };

    let mut active_tasks = Vec::new();
    let mut stateful_tasks = Vec::new();
    for (i, sub) in subs.iter().enumerate() {
        for partition in 0..sub.tasks.max(0) {
            active_tasks.push((i, partition));
            if sub.stateful {
                stateful_tasks.push((i, partition));
            }
        }
    }
    if sorted_members.is_empty() {
        if let Some(&(sub, partition)) = active_tasks.first() {
            let id = &subs[sub].id;
            return Err(format!(
                "No member available to assign active task {id}_{partition}."
            ));
        }
    }
    let standbys = stateful_tasks
        .len()
        .saturating_mul(standby_replicas as usize);
    let total_tasks = active_tasks.len().saturating_add(standbys);

    let process_ids: BTreeSet<&str> = sorted_members
        .iter()
        .map(|m| m.process_id.as_str())
        .collect();
    let process_index: BTreeMap<&str, usize> = process_ids
        .iter()
        .enumerate()
        .map(|(i, &p)| (p, i))
        .collect();
    let mut state = State {
        members: Vec::with_capacity(sorted_members.len()),
        processes: process_ids
            .iter()
            .map(|_| ProcessState {
                members: Vec::new(),
                tasks: 0,
                holds: BTreeSet::new(),
            })
            .collect(),
        prev_active: BTreeMap::new(),
        prev_standby: BTreeMap::new(),
        active_quota: Quota::new(active_tasks.len(), sorted_members.len()),
        total_quota: Quota::new(total_tasks, sorted_members.len()),
    };

    // (is previous standby, offset sum, member) per task, ranked below.
    let mut candidates: BTreeMap<Task, Vec<(bool, i64, usize)>> = BTreeMap::new();
    for (m, member) in sorted_members.iter().enumerate() {
        let process = process_index[member.process_id.as_str()];
        state.processes[process].members.push(m);
        state.members.push(MemberState {
            process,
            tasks: 0,
            active: Vec::new(),
            standby: Vec::new(),
        });

        for (sub, partitions) in &member.current.active {
            for task in partitions.iter().filter_map(|&p| resolve(sub, p)) {
                // Should two members claim the same active task, the lowest member id keeps it.
                state.prev_active.entry(task).or_insert(m);
            }
        }
        let mut standbys = BTreeSet::new();
        for (sub, partitions) in &member.current.standby {
            for &partition in partitions {
                if let Some(task) = resolve(sub, partition) {
                    standbys.insert(task);
                    // A standby without a reported offset counts as the most lagging one.
                    let offset = member
                        .task_offsets
                        .get(&(sub.clone(), partition))
                        .copied()
                        .unwrap_or(0);
                    candidates.entry(task).or_default().push((true, offset, m));
                }
            }
        }
        // Offsets reveal state on local disk even when the member holds nothing (e.g. it
        // restarted and rejoined with a new member id), a weaker claim than a standby.
        for ((sub, partition), &offset) in &member.task_offsets {
            if let Some(task) = resolve(sub, *partition).filter(|t| !standbys.contains(t)) {
                candidates.entry(task).or_default().push((false, offset, m));
            }
        }
    }
    for (task, mut list) in candidates {
        list.sort_by_key(|&(standby, offset, m)| (!standby, Reverse(offset), m));
        let ranked = list.into_iter().map(|(_, _, m)| m).collect();
        state.prev_standby.insert(task, ranked);
    }

    state.assign_actives(active_tasks);
    if standby_replicas > 0 {
        state.assign_standbys(stateful_tasks, standby_replicas);
    }

    let to_task_ids = |tasks: &[Task]| -> TaskIds {
        let mut ids = TaskIds::new();
        for &(sub, partition) in tasks {
            ids.entry(subs[sub].id.clone())
                .or_default()
                .insert(partition);
        }
        ids
    };
    Ok(sorted_members
        .iter()
        .zip(&state.members)
        .map(|(member, s)| {
            let tasks = AssignedTasks {
                active: to_task_ids(&s.active),
                standby: to_task_ids(&s.standby),
            };
            (member.member_id.clone(), tasks)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, process: &str) -> AssignorMember {
        AssignorMember {
            member_id: id.to_string(),
            process_id: process.to_string(),
            current: AssignedTasks::default(),
            task_offsets: BTreeMap::new(),
        }
    }

    /// One member per process, named m0.. on processes p0..
    fn members(n: usize) -> Vec<AssignorMember> {
        (0..n)
            .map(|i| member(&format!("m{i}"), &format!("p{i}")))
            .collect()
    }

    fn sub(id: &str, tasks: i32, stateful: bool) -> AssignorSubtopology {
        AssignorSubtopology {
            id: id.to_string(),
            tasks,
            stateful,
        }
    }

    fn ids(pairs: &[(&str, i32)]) -> TaskIds {
        let mut ids = TaskIds::new();
        for &(s, p) in pairs {
            ids.entry(s.to_string()).or_default().insert(p);
        }
        ids
    }

    fn flatten(ids: &TaskIds) -> Vec<(String, i32)> {
        ids.iter()
            .flat_map(|(s, ps)| ps.iter().map(move |&p| (s.clone(), p)))
            .collect()
    }

    fn count(ids: &TaskIds) -> usize {
        ids.values().map(BTreeSet::len).sum()
    }

    /// The members with `result` as their current assignment, for a follow-up rebalance.
    fn with_current(
        members: &[AssignorMember],
        result: &BTreeMap<String, AssignedTasks>,
    ) -> Vec<AssignorMember> {
        members
            .iter()
            .map(|m| AssignorMember {
                current: result.get(&m.member_id).cloned().unwrap_or_default(),
                ..m.clone()
            })
            .collect()
    }

    /// Asserts the invariants every assignment must satisfy.
    fn check_invariants(
        members: &[AssignorMember],
        subs: &[AssignorSubtopology],
        replicas: u32,
        result: &BTreeMap<String, AssignedTasks>,
    ) {
        let ids: BTreeSet<&str> = members.iter().map(|m| m.member_id.as_str()).collect();
        assert_eq!(
            result.keys().map(String::as_str).collect::<BTreeSet<_>>(),
            ids
        );
        let process_of: BTreeMap<&str, &str> = members
            .iter()
            .map(|m| (m.member_id.as_str(), m.process_id.as_str()))
            .collect();
        let processes: BTreeSet<&str> = process_of.values().copied().collect();

        let mut active_owner: BTreeMap<(String, i32), usize> = BTreeMap::new();
        let mut holders: BTreeMap<(String, i32), Vec<&str>> = BTreeMap::new();
        for (m, tasks) in result {
            for ids in [&tasks.active, &tasks.standby] {
                assert!(
                    ids.values().all(|ps| !ps.is_empty()),
                    "empty entry: {ids:?}"
                );
            }
            for task in flatten(&tasks.active) {
                *active_owner.entry(task.clone()).or_default() += 1;
                holders
                    .entry(task)
                    .or_default()
                    .push(process_of[m.as_str()]);
            }
            for task in flatten(&tasks.standby) {
                holders
                    .entry(task)
                    .or_default()
                    .push(process_of[m.as_str()]);
            }
        }
        let mut expected = 0;
        for s in subs {
            for p in 0..s.tasks {
                let task = (s.id.clone(), p);
                assert_eq!(active_owner.get(&task), Some(&1), "active {task:?}");
                let copies = holders.remove(&task).unwrap_or_default();
                let distinct: BTreeSet<&&str> = copies.iter().collect();
                assert_eq!(distinct.len(), copies.len(), "{task:?} twice on a process");
                let standbys = if s.stateful {
                    (replicas as usize).min(processes.len() - 1)
                } else {
                    0
                };
                assert_eq!(copies.len(), 1 + standbys, "copies of {task:?}");
                expected += 1;
            }
        }
        assert!(holders.is_empty(), "unknown tasks assigned: {holders:?}");
        assert_eq!(active_owner.len(), expected);
    }

    fn active_counts(result: &BTreeMap<String, AssignedTasks>) -> Vec<usize> {
        result.values().map(|t| count(&t.active)).collect()
    }

    fn spread(counts: &[usize]) -> usize {
        counts.iter().max().unwrap() - counts.iter().min().unwrap()
    }

    /// Number of active tasks whose owner changed between two assignments.
    fn moved_actives(
        before: &BTreeMap<String, AssignedTasks>,
        after: &BTreeMap<String, AssignedTasks>,
    ) -> usize {
        let owner = |r: &BTreeMap<String, AssignedTasks>| -> BTreeMap<(String, i32), String> {
            r.iter()
                .flat_map(|(m, t)| flatten(&t.active).into_iter().map(move |k| (k, m.clone())))
                .collect()
        };
        let (b, a) = (owner(before), owner(after));
        a.iter().filter(|(k, m)| b.get(*k) != Some(*m)).count()
    }

    #[test]
    fn word_count_example() {
        let subs = [sub("0", 3, false), sub("1", 3, true)];
        let ms = members(2);
        let result = assign(&ms, &subs, 1).unwrap();
        check_invariants(&ms, &subs, 1, &result);
        assert_eq!(active_counts(&result), vec![3, 3]);
        for tasks in result.values() {
            assert!(!tasks.standby.contains_key("0"));
            let stateful_actives = tasks.active.get("1").map_or(0, BTreeSet::len);
            assert_eq!(count(&tasks.standby), 3 - stateful_actives);
        }
        // A second round keeps everything in place.
        let again = assign(&with_current(&ms, &result), &subs, 1).unwrap();
        assert_eq!(again, result);
    }

    #[test]
    fn fresh_assignment_is_balanced_and_range_like() {
        let subs = [sub("a", 4, true), sub("b", 4, false)];
        let ms = members(4);
        let result = assign(&ms, &subs, 0).unwrap();
        check_invariants(&ms, &subs, 0, &result);
        // Tasks go round-robin in (subtopology, partition) order: the members line up with
        // the partitions, as a range assignor would.
        for (i, tasks) in result.values().enumerate() {
            assert_eq!(tasks.active, ids(&[("a", i as i32), ("b", i as i32)]));
            assert!(tasks.standby.is_empty());
        }
        // Unevenly divisible counts differ by at most one.
        let subs = [sub("a", 7, true), sub("b", 3, false)];
        let result = assign(&members(3), &subs, 0).unwrap();
        assert_eq!(spread(&active_counts(&result)), 1);
    }

    #[test]
    fn rerun_with_previous_result_is_stable() {
        let subs = [sub("x", 5, true), sub("y", 7, false), sub("z", 2, true)];
        let mut ms = members(3);
        ms.push(member("m3", "p0")); // a second thread on p0
        for replicas in 0..3 {
            let first = assign(&ms, &subs, replicas).unwrap();
            let second = assign(&with_current(&ms, &first), &subs, replicas).unwrap();
            assert_eq!(first, second, "replicas {replicas}");
        }
    }

    #[test]
    fn adding_a_member_moves_only_the_necessary_tasks() {
        let subs = [sub("s", 12, true)];
        let ms = members(3);
        let before = assign(&ms, &subs, 1).unwrap();
        let mut grown = with_current(&ms, &before);
        grown.push(member("m3", "p3"));
        let after = assign(&grown, &subs, 1).unwrap();
        check_invariants(&grown, &subs, 1, &after);
        assert_eq!(active_counts(&after), vec![3, 3, 3, 3]);
        // 4 tasks each before, 3 after: exactly one task leaves each old member.
        assert_eq!(moved_actives(&before, &after), 3);
        for m in ["m0", "m1", "m2"] {
            let kept = flatten(&after[m].active);
            let had = flatten(&before[m].active);
            assert!(kept.iter().all(|t| had.contains(t)), "{m} gained a task");
        }
    }

    #[test]
    fn removing_a_member_keeps_everyone_elses_tasks() {
        let subs = [sub("s", 9, true), sub("t", 4, false)];
        let ms = members(4);
        let before = assign(&ms, &subs, 1).unwrap();
        let shrunk: Vec<_> = with_current(&ms, &before)
            .into_iter()
            .filter(|m| m.member_id != "m2")
            .collect();
        let after = assign(&shrunk, &subs, 1).unwrap();
        check_invariants(&shrunk, &subs, 1, &after);
        assert!(spread(&active_counts(&after)) <= 1);
        for m in ["m0", "m1", "m3"] {
            let had = flatten(&before[m].active);
            let kept = flatten(&after[m].active);
            assert!(had.iter().all(|t| kept.contains(t)), "{m} lost a task");
        }
        // Only m2's tasks moved.
        assert_eq!(moved_actives(&before, &after), count(&before["m2"].active));
    }

    #[test]
    fn quota_shrinks_as_members_fill_up() {
        // 10 tasks over 4 members: quota 3, but only two members may keep 3.
        let subs = [sub("s", 10, false)];
        let mut ms = members(4);
        let current = [&[0, 1, 2][..], &[3, 4, 5], &[6, 7, 8], &[9]];
        for (m, tasks) in ms.iter_mut().zip(current) {
            let pairs: Vec<_> = tasks.iter().map(|&p| ("s", p)).collect();
            m.current.active = ids(&pairs);
        }
        let result = assign(&ms, &subs, 0).unwrap();
        assert_eq!(active_counts(&result), vec![3, 3, 2, 2]);
        assert_eq!(result["m2"].active, ids(&[("s", 6), ("s", 7)]));
        assert_eq!(result["m3"].active, ids(&[("s", 8), ("s", 9)]));
    }

    #[test]
    fn previous_standby_takes_over_an_orphaned_active() {
        let subs = [sub("s", 2, true)];
        // m0 (gone) ran s-0 with a standby on m2; m1 ran s-1.
        let mut ms = members(3);
        ms[1].current.active = ids(&[("s", 1)]);
        ms[2].current.standby = ids(&[("s", 0)]);
        let ms = &ms[1..];
        let result = assign(ms, &subs, 0).unwrap();
        assert_eq!(result["m1"].active, ids(&[("s", 1)]));
        assert_eq!(result["m2"].active, ids(&[("s", 0)]));
    }

    #[test]
    fn standby_outranks_offsets_and_higher_offsets_win() {
        let subs = [sub("s", 1, true)];
        let mut ms = members(3);
        ms[0].task_offsets.insert(("s".into(), 0), 500);
        ms[1].task_offsets.insert(("s".into(), 0), 900);
        let result = assign(&ms, &subs, 0).unwrap();
        assert_eq!(result["m1"].active, ids(&[("s", 0)]), "highest offset");
        // A previous standby wins even with a lower offset.
        ms[2].current.standby = ids(&[("s", 0)]);
        ms[2].task_offsets.insert(("s".into(), 0), 10);
        let result = assign(&ms, &subs, 0).unwrap();
        assert_eq!(result["m2"].active, ids(&[("s", 0)]), "previous standby");
    }

    #[test]
    fn standbys_are_sticky_and_follow_a_former_active() {
        let subs = [sub("s", 2, true)];
        let mut ms = members(3);
        // m0 ran s-0 before but s-0 is now m1's; m2 had s-1 as a standby.
        ms[0].current.active = ids(&[("s", 1)]);
        ms[1].current.active = ids(&[("s", 0)]);
        ms[2].current.standby = ids(&[("s", 1)]);
        ms[0].current.standby = ids(&[("s", 0)]);
        let result = assign(&ms, &subs, 1).unwrap();
        check_invariants(&ms, &subs, 1, &result);
        assert_eq!(result["m0"].active, ids(&[("s", 1)]));
        assert_eq!(result["m1"].active, ids(&[("s", 0)]));
        assert_eq!(result["m0"].standby, ids(&[("s", 0)]));
        assert_eq!(result["m2"].standby, ids(&[("s", 1)]));
    }

    #[test]
    fn sticky_standbys_respect_the_total_quota() {
        // 3 stateful tasks, 1 replica, 3 members: at most 2 tasks per member overall.
        let subs = [sub("s", 3, true)];
        let totals = |r: &BTreeMap<String, AssignedTasks>| -> Vec<usize> {
            r.values()
                .map(|t| count(&t.active) + count(&t.standby))
                .collect()
        };

        // m0 held standbys of both tasks it does not run: it keeps only one of them.
        let mut ms = members(3);
        for (i, m) in ms.iter_mut().enumerate() {
            m.current.active = ids(&[("s", i as i32)]);
        }
        ms[0].current.standby = ids(&[("s", 1), ("s", 2)]);
        let result = assign(&ms, &subs, 1).unwrap();
        check_invariants(&ms, &subs, 1, &result);
        assert_eq!(result["m0"].standby, ids(&[("s", 2)]));
        assert_eq!(totals(&result), vec![2, 2, 2]);

        // m0 ran all three actives: it keeps one, and a standby of only one of the others.
        let mut ms = members(3);
        ms[0].current.active = ids(&[("s", 0), ("s", 1), ("s", 2)]);
        let result = assign(&ms, &subs, 1).unwrap();
        check_invariants(&ms, &subs, 1, &result);
        assert_eq!(result["m0"].active, ids(&[("s", 0)]));
        assert_eq!(result["m0"].standby, ids(&[("s", 2)]));
        assert_eq!(totals(&result), vec![2, 2, 2]);
    }

    #[test]
    fn standby_count_is_capped_by_the_number_of_processes() {
        let subs = [sub("s", 4, true), sub("t", 2, false)];
        for processes in 1..=4 {
            for replicas in 0..=3 {
                // Two members per process: extra threads never make room for more copies.
                let ms: Vec<_> = (0..processes * 2)
                    .map(|i| member(&format!("m{i}"), &format!("p{}", i / 2)))
                    .collect();
                let result = assign(&ms, &subs, replicas).unwrap();
                check_invariants(&ms, &subs, replicas, &result);
            }
        }
    }

    #[test]
    fn members_of_a_process_share_its_load() {
        // p0 runs two threads, p1 one: per-thread load is equal, so p0 takes two thirds.
        let subs = [sub("s", 6, false)];
        let ms = vec![member("a", "p0"), member("b", "p0"), member("c", "p1")];
        let result = assign(&ms, &subs, 0).unwrap();
        check_invariants(&ms, &subs, 0, &result);
        assert_eq!(active_counts(&result), vec![2, 2, 2]);

        // With standbys, the two threads of p0 never hold copies of the same task.
        let subs = [sub("s", 6, true)];
        let ms = vec![
            member("a", "p0"),
            member("b", "p0"),
            member("c", "p1"),
            member("d", "p1"),
        ];
        let result = assign(&ms, &subs, 1).unwrap();
        check_invariants(&ms, &subs, 1, &result);
        let totals: Vec<usize> = result
            .values()
            .map(|t| count(&t.active) + count(&t.standby))
            .collect();
        assert_eq!(totals, vec![3, 3, 3, 3]);
    }

    #[test]
    fn vanished_tasks_and_empty_members() {
        let subs = [sub("s", 2, true), sub("empty", 0, true)];
        let mut ms = members(4);
        ms[0].current.active = ids(&[("s", 0), ("s", 7), ("gone", 0)]);
        ms[0].current.standby = ids(&[("s", -1), ("empty", 0)]);
        ms[1].task_offsets.insert(("gone".into(), 1), 42);
        let result = assign(&ms, &subs, 0).unwrap();
        check_invariants(&ms, &subs, 0, &result);
        assert_eq!(result["m0"].active, ids(&[("s", 0)]));
        // Four members, two tasks: two members get an empty entry, nobody an empty set.
        let idle = result.values().filter(|t| **t == AssignedTasks::default());
        assert_eq!(idle.count(), 2);
    }

    #[test]
    fn errors() {
        let subs = [sub("s", 1, false)];
        assert!(assign(&[], &subs, 0).is_err());
        assert_eq!(assign(&[], &[sub("s", 0, true)], 1), Ok(BTreeMap::new()));
        let twice = [member("m", "p0"), member("m", "p1")];
        assert!(assign(&twice, &subs, 0).is_err());
        assert!(assign(&members(1), &[sub("s", 1, true), sub("s", 2, true)], 0).is_err());
    }

    /// xorshift64*: a tiny deterministic generator, so failures reproduce from the seed.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) % n.max(1)
        }
    }

    /// Random groups with random (possibly stale, overlapping or conflicting) current tasks.
    fn random_case(rng: &mut Rng) -> (Vec<AssignorMember>, Vec<AssignorSubtopology>, u32) {
        let subs: Vec<_> = (0..1 + rng.below(4))
            .map(|i| {
                sub(
                    &format!("{}", i * 7 % 11),
                    rng.below(9) as i32,
                    rng.below(2) == 0,
                )
            })
            .collect();
        let processes = 1 + rng.below(5);
        let mut ms: Vec<_> = (0..1 + rng.below(8))
            .map(|i| member(&format!("m{i}"), &format!("p{}", rng.below(processes))))
            .collect();
        for m in &mut ms {
            for _ in 0..rng.below(6) {
                let s = format!("{}", rng.below(4) * 7 % 11);
                let p = rng.below(10) as i32 - 1;
                match rng.below(3) {
                    0 => m.current.active.entry(s).or_default().insert(p),
                    1 => m.current.standby.entry(s).or_default().insert(p),
                    _ => m
                        .task_offsets
                        .insert((s, p), rng.below(1000) as i64)
                        .is_none(),
                };
            }
        }
        (ms, subs, rng.below(4) as u32)
    }

    const ROUNDS: usize = 3000;

    #[test]
    fn random_inputs_keep_the_invariants() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for case in 0..ROUNDS {
            let (ms, subs, replicas) = random_case(&mut rng);
            let result = assign(&ms, &subs, replicas).unwrap();
            check_invariants(&ms, &subs, replicas, &result);

            // Deterministic whatever the input order.
            let mut shuffled = ms.clone();
            shuffled.reverse();
            shuffled.rotate_left(rng.below(ms.len() as u64) as usize);
            let mut subs_rev = subs.clone();
            subs_rev.reverse();
            assert_eq!(assign(&shuffled, &subs_rev, replicas).unwrap(), result);

            // One member per process: active counts differ by at most one.
            let single = ms
                .iter()
                .map(|m| m.process_id.as_str())
                .collect::<BTreeSet<_>>()
                .len()
                == ms.len();
            if single {
                assert!(spread(&active_counts(&result)) <= 1, "case {case}");
            }

            // Rebalancing again changes nothing. With multi-member processes the first result
            // can still shift a little (member quotas vs. process loads), but it must settle
            // rather than oscillate.
            let rerun = assign(&with_current(&ms, &result), &subs, replicas).unwrap();
            if single {
                assert_eq!(rerun, result, "case {case}");
            }
            let (mut previous, mut current) = (result.clone(), rerun);
            let mut rounds = 0;
            while previous != current {
                rounds += 1;
                assert!(rounds < 10, "case {case} does not settle");
                let next = assign(&with_current(&ms, &current), &subs, replicas).unwrap();
                previous = std::mem::replace(&mut current, next);
            }

            // Scaling: one member leaves (if any is left) and a new one joins a new process.
            let mut scaled = with_current(&ms, &result);
            if scaled.len() > 1 {
                scaled.remove(rng.below(scaled.len() as u64) as usize);
            }
            scaled.push(member("new", "new-process"));
            let after = assign(&scaled, &subs, replicas).unwrap();
            check_invariants(&scaled, &subs, replicas, &after);
            if single {
                assert!(spread(&active_counts(&after)) <= 1, "case {case}");
            }
        }
    }
}
