//! ACLs and the decision Kafka's StandardAuthorizer makes with them: a pure function of
//! (principal, host, operation, resource, ACL set, super users, the no-ACL default).
//!
//! Kafka's rules, as StandardAuthorizerData applies them:
//! - a super user (super.users) may do anything;
//! - the ACLs that concern a resource are the LITERAL ones naming it, the LITERAL ones
//!   naming `*` (every resource of the type), and the PREFIXED ones whose name starts it;
//! - of those, an ACL applies to a request when its principal is the requester's or
//!   `User:*`, its host is the requester's or `*`, and its operation is the one asked for
//!   or ALL; an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, and an ALLOW of
//!   ALTER_CONFIGS allows DESCRIBE_CONFIGS (a DENY implies nothing);
//! - a DENY that applies wins over any ALLOW; else an ALLOW that applies allows;
//! - a resource no ACL concerns at all gets allow.everyone.if.no.acl.found (false by
//!   default: denied); one that has ACLs, none of which apply, is denied.

use std::collections::{BTreeMap, BTreeSet};

use crate::KafkaPrincipal;

/// Kafka's ResourceType codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceType {
    Topic,
    Group,
    Cluster,
    TransactionalId,
    DelegationToken,
    User,
}

impl ResourceType {
    pub const ALL: [ResourceType; 6] = [
        ResourceType::Topic,
        ResourceType::Group,
        ResourceType::Cluster,
        ResourceType::TransactionalId,
        ResourceType::DelegationToken,
        ResourceType::User,
    ];

    pub fn code(self) -> i8 {
        match self {
            ResourceType::Topic => 2,
            ResourceType::Group => 3,
            ResourceType::Cluster => 4,
            ResourceType::TransactionalId => 5,
            ResourceType::DelegationToken => 6,
            ResourceType::User => 7,
        }
    }

    pub fn from_code(code: i8) -> Option<ResourceType> {
        ResourceType::ALL.into_iter().find(|t| t.code() == code)
    }

    /// The operations Kafka lets ACLs name on this type (AclEntry.supportedOperations),
    /// which KIP-430's authorized-operations fields list.
    pub fn operations(self) -> &'static [AclOperation] {
        use AclOperation::*;
        match self {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ],
            ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
            ResourceType::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
            ResourceType::TransactionalId => &[Describe, Write, TwoPhaseCommit],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
        }
    }
}

/// Kafka's PatternType codes for stored ACLs (MATCH and ANY only filter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PatternType {
    Literal,
    Prefixed,
}

impl PatternType {
    pub fn code(self) -> i8 {
        match self {
            PatternType::Literal => 3,
            PatternType::Prefixed => 4,
        }
    }

    pub fn from_code(code: i8) -> Option<PatternType> {
        match code {
            3 => Some(PatternType::Literal),
            4 => Some(PatternType::Prefixed),
            _ => None,
        }
    }
}

/// Kafka's AclOperation codes (ALL applies to every operation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AclOperation {
    All,
    Read,
    Write,
    Create,
    Delete,
    Alter,
    Describe,
    ClusterAction,
    DescribeConfigs,
    AlterConfigs,
    IdempotentWrite,
    CreateTokens,
    DescribeTokens,
    TwoPhaseCommit,
}

impl AclOperation {
    pub const EVERY: [AclOperation; 14] = [
        AclOperation::All,
        AclOperation::Read,
        AclOperation::Write,
        AclOperation::Create,
        AclOperation::Delete,
        AclOperation::Alter,
        AclOperation::Describe,
        AclOperation::ClusterAction,
        AclOperation::DescribeConfigs,
        AclOperation::AlterConfigs,
        AclOperation::IdempotentWrite,
        AclOperation::CreateTokens,
        AclOperation::DescribeTokens,
        AclOperation::TwoPhaseCommit,
    ];

    pub fn code(self) -> i8 {
        match self {
            AclOperation::All => 2,
            AclOperation::Read => 3,
            AclOperation::Write => 4,
            AclOperation::Create => 5,
            AclOperation::Delete => 6,
            AclOperation::Alter => 7,
            AclOperation::Describe => 8,
            AclOperation::ClusterAction => 9,
            AclOperation::DescribeConfigs => 10,
            AclOperation::AlterConfigs => 11,
            AclOperation::IdempotentWrite => 12,
            AclOperation::CreateTokens => 13,
            AclOperation::DescribeTokens => 14,
            AclOperation::TwoPhaseCommit => 15,
        }
    }

    pub fn from_code(code: i8) -> Option<AclOperation> {
        AclOperation::EVERY.into_iter().find(|o| o.code() == code)
    }

    /// The operations an ALLOW of this one also allows.
    fn implied_by_allow(self) -> &'static [AclOperation] {
        match self {
            AclOperation::Read
            | AclOperation::Write
            | AclOperation::Delete
            | AclOperation::Alter => &[AclOperation::Describe],
            AclOperation::AlterConfigs => &[AclOperation::DescribeConfigs],
            _ => &[],
        }
    }
}

/// Kafka's AclPermissionType codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Permission {
    Deny,
    Allow,
}

impl Permission {
    pub fn code(self) -> i8 {
        match self {
            Permission::Deny => 2,
            Permission::Allow => 3,
        }
    }

    pub fn from_code(code: i8) -> Option<Permission> {
        match code {
            2 => Some(Permission::Deny),
            3 => Some(Permission::Allow),
            _ => None,
        }
    }
}

/// One ACL as CreateAcls states it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern_type: PatternType,
    /// `User:alice`, or `User:*` for every principal.
    pub principal: String,
    /// An address, or `*` for every host.
    pub host: String,
    pub operation: AclOperation,
    pub permission: Permission,
}

/// The name a LITERAL ACL gives to mean every resource of its type.
pub const WILDCARD: &str = "*";
/// The principal that means every principal.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// The ACLs of a cluster, indexed by the resource pattern they name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Acls {
    by_pattern: BTreeMap<(ResourceType, PatternType), BTreeMap<String, BTreeSet<AclBinding>>>,
}

impl Acls {
    pub fn new(bindings: impl IntoIterator<Item = AclBinding>) -> Acls {
        let mut acls = Acls::default();
        for binding in bindings {
            acls.add(binding);
        }
        acls
    }

    pub fn add(&mut self, binding: AclBinding) {
        self.by_pattern
            .entry((binding.resource_type, binding.pattern_type))
            .or_default()
            .entry(binding.resource_name.clone())
            .or_default()
            .insert(binding);
    }

    pub fn remove(&mut self, binding: &AclBinding) -> bool {
        let key = (binding.resource_type, binding.pattern_type);
        let Some(names) = self.by_pattern.get_mut(&key) else {
            return false;
        };
        let Some(set) = names.get_mut(&binding.resource_name) else {
            return false;
        };
        let removed = set.remove(binding);
        if set.is_empty() {
            names.remove(&binding.resource_name);
            if names.is_empty() {
                self.by_pattern.remove(&key);
            }
        }
        removed
    }

    pub fn iter(&self) -> impl Iterator<Item = &AclBinding> {
        self.by_pattern
            .values()
            .flat_map(BTreeMap::values)
            .flatten()
    }

    pub fn len(&self) -> usize {
        self.iter().count()
    }

    pub fn is_empty(&self) -> bool {
        self.by_pattern.is_empty()
    }

    /// The ACLs that concern a resource: LITERAL on its name or `*`, PREFIXED on a
    /// prefix of its name (looked up prefix by prefix: names are short, ACL sets large).
    fn concerning<'a>(
        &'a self,
        resource_type: ResourceType,
        name: &'a str,
    ) -> impl Iterator<Item = &'a AclBinding> + 'a {
        let mut lookups: Vec<(PatternType, &str)> = vec![(PatternType::Literal, name)];
        if name != WILDCARD {
            lookups.push((PatternType::Literal, WILDCARD));
        }
        lookups.extend(
            name.char_indices()
                .map(|(at, c)| (PatternType::Prefixed, &name[..at + c.len_utf8()])),
        );
        lookups
            .into_iter()
            .filter_map(move |(pattern_type, key)| {
                self.by_pattern
                    .get(&(resource_type, pattern_type))?
                    .get(key)
            })
            .flatten()
    }
}

/// Who may do what: the ACLs, super.users and allow.everyone.if.no.acl.found.
#[derive(Debug, Clone, Default)]
pub struct Authorizer {
    pub acls: Acls,
    pub super_users: BTreeSet<String>,
    pub allow_everyone_if_no_acl_found: bool,
}

impl Authorizer {
    /// May `principal`, connected from `host`, do `operation` on the resource?
    pub fn authorize(
        &self,
        principal: &KafkaPrincipal,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        let principal = principal.to_string();
        if self.super_users.contains(&principal) {
            return true;
        }
        let mut concerned = false;
        let mut allowed = false;
        for acl in self.acls.concerning(resource_type, name) {
            concerned = true;
            let applies = (acl.principal == principal || acl.principal == WILDCARD_PRINCIPAL)
                && (acl.host == host || acl.host == WILDCARD);
            if !applies {
                continue;
            }
            match acl.permission {
                Permission::Deny => {
                    if acl.operation == operation || acl.operation == AclOperation::All {
                        return false;
                    }
                }
                Permission::Allow => {
                    allowed |= acl.operation == operation
                        || acl.operation == AclOperation::All
                        || acl.operation.implied_by_allow().contains(&operation);
                }
            }
        }
        if !concerned {
            return self.allow_everyone_if_no_acl_found;
        }
        allowed
    }

    /// KIP-430's authorized-operations bitfield: bit n set for each operation (code n)
    /// of the resource type the principal may do.
    pub fn authorized_operations(
        &self,
        principal: &KafkaPrincipal,
        host: &str,
        resource_type: ResourceType,
        name: &str,
    ) -> i32 {
        resource_type
            .operations()
            .iter()
            .filter(|op| self.authorize(principal, host, **op, resource_type, name))
            .fold(0, |bits, op| bits | (1 << op.code()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn acl(
        resource_type: ResourceType,
        name: &str,
        pattern_type: PatternType,
        principal: &str,
        operation: AclOperation,
        permission: Permission,
    ) -> AclBinding {
        AclBinding {
            resource_type,
            resource_name: name.into(),
            pattern_type,
            principal: principal.into(),
            host: WILDCARD.into(),
            operation,
            permission,
        }
    }

    fn alice() -> KafkaPrincipal {
        KafkaPrincipal::user("alice")
    }

    #[test]
    fn kafkas_rules_case_by_case() {
        use AclOperation::*;
        use PatternType::*;
        use Permission::*;
        use ResourceType::*;
        let authorizer = Authorizer {
            acls: Acls::new([
                acl(Topic, "orders", Literal, "User:alice", Read, Allow),
                acl(Topic, "pay-", Prefixed, "User:*", Write, Allow),
                acl(Topic, "pay-secret", Literal, "User:alice", All, Deny),
                acl(Topic, "*", Literal, "User:bob", Describe, Allow),
                acl(Group, "g", Literal, "User:alice", AlterConfigs, Allow),
            ]),
            super_users: BTreeSet::from(["User:admin".to_string()]),
            allow_everyone_if_no_acl_found: false,
        };
        let may = |who: &str, op, ty, name: &str| {
            authorizer.authorize(&KafkaPrincipal::user(who), "10.0.0.1", op, ty, name)
        };
        assert!(may("alice", Read, Topic, "orders"));
        assert!(
            may("alice", Describe, Topic, "orders"),
            "READ implies DESCRIBE"
        );
        assert!(!may("alice", Write, Topic, "orders"));
        assert!(
            may("carol", Write, Topic, "pay-in"),
            "a prefix, any principal"
        );
        assert!(!may("alice", Write, Topic, "pay-secret"), "DENY wins");
        assert!(may("bob", Describe, Topic, "anything"), "the wildcard name");
        assert!(!may("bob", Read, Topic, "anything"));
        assert!(
            may("alice", DescribeConfigs, Group, "g"),
            "ALTER_CONFIGS implies DESCRIBE_CONFIGS"
        );
        assert!(!may("alice", Read, Group, "g"));
        assert!(
            !may("alice", Read, Group, "other"),
            "no ACL: denied by default"
        );
        assert!(
            may("admin", Delete, Cluster, "kafka-cluster"),
            "super users"
        );
        let open = Authorizer {
            allow_everyone_if_no_acl_found: true,
            ..authorizer.clone()
        };
        assert!(open.authorize(&alice(), "h", Read, Group, "other"));
        assert!(
            !open.authorize(&alice(), "h", Read, Topic, "orders-2"),
            "bob's wildcard ACL concerns every topic"
        );
        assert_eq!(
            authorizer.authorized_operations(&alice(), "h", Topic, "orders"),
            (1 << Read.code()) | (1 << Describe.code())
        );
    }

    #[test]
    fn hosts_and_deny_of_implied_operations() {
        use AclOperation::*;
        let mut deny_read = acl(
            ResourceType::Topic,
            "t",
            PatternType::Literal,
            "User:alice",
            Read,
            Permission::Deny,
        );
        deny_read.host = "10.0.0.9".into();
        let authorizer = Authorizer {
            acls: Acls::new([
                acl(
                    ResourceType::Topic,
                    "t",
                    PatternType::Literal,
                    "User:alice",
                    All,
                    Permission::Allow,
                ),
                deny_read,
            ]),
            ..Authorizer::default()
        };
        assert!(!authorizer.authorize(&alice(), "10.0.0.9", Read, ResourceType::Topic, "t"));
        assert!(authorizer.authorize(&alice(), "10.0.0.8", Read, ResourceType::Topic, "t"));
        assert!(
            authorizer.authorize(&alice(), "10.0.0.9", Describe, ResourceType::Topic, "t"),
            "a DENY of READ does not deny DESCRIBE"
        );
    }

    /// The rules as the documentation states them, over a plain list.
    /// One authorization question.
    struct Query<'a> {
        principal: &'a str,
        host: &'a str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &'a str,
    }

    fn model(
        bindings: &[AclBinding],
        super_users: &BTreeSet<String>,
        allow_if_none: bool,
        query: &Query<'_>,
    ) -> bool {
        let Query {
            principal,
            host,
            operation,
            resource_type,
            name,
        } = *query;
        if super_users.contains(principal) {
            return true;
        }
        let concerning: Vec<&AclBinding> = bindings
            .iter()
            .filter(|b| b.resource_type == resource_type)
            .filter(|b| match b.pattern_type {
                PatternType::Literal => b.resource_name == name || b.resource_name == "*",
                PatternType::Prefixed => name.starts_with(&b.resource_name),
            })
            .collect();
        if concerning.is_empty() {
            return allow_if_none;
        }
        let applying: Vec<&&AclBinding> = concerning
            .iter()
            .filter(|b| b.principal == principal || b.principal == "User:*")
            .filter(|b| b.host == host || b.host == "*")
            .collect();
        let denies = applying.iter().any(|b| {
            b.permission == Permission::Deny
                && (b.operation == operation || b.operation == AclOperation::All)
        });
        let implies = |granted: AclOperation| match operation {
            AclOperation::Describe => matches!(
                granted,
                AclOperation::Read
                    | AclOperation::Write
                    | AclOperation::Delete
                    | AclOperation::Alter
            ),
            AclOperation::DescribeConfigs => granted == AclOperation::AlterConfigs,
            _ => false,
        };
        let allows = applying.iter().any(|b| {
            b.permission == Permission::Allow
                && (b.operation == operation
                    || b.operation == AclOperation::All
                    || implies(b.operation))
        });
        !denies && allows
    }

    fn binding() -> impl Strategy<Value = AclBinding> {
        (
            prop::sample::select(vec![ResourceType::Topic, ResourceType::Group]),
            prop::sample::select(vec!["a", "ab", "abc", "b", "*"]),
            prop::sample::select(vec![PatternType::Literal, PatternType::Prefixed]),
            prop::sample::select(vec!["User:alice", "User:bob", "User:*"]),
            prop::sample::select(vec!["h1", "h2", "*"]),
            prop::sample::select(AclOperation::EVERY.to_vec()),
            prop::sample::select(vec![Permission::Allow, Permission::Deny]),
        )
            .prop_map(
                |(resource_type, name, pattern_type, principal, host, operation, permission)| {
                    AclBinding {
                        resource_type,
                        resource_name: name.into(),
                        pattern_type,
                        principal: principal.into(),
                        host: host.into(),
                        operation,
                        permission,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn the_indexed_authorizer_decides_as_the_rules_say(
            bindings in prop::collection::vec(binding(), 0..12),
            super_user in any::<bool>(),
            allow_if_none in any::<bool>(),
            who in prop::sample::select(vec!["alice", "bob", "carol"]),
            host in prop::sample::select(vec!["h1", "h2"]),
            operation in prop::sample::select(AclOperation::EVERY[1..].to_vec()),
            resource_type in prop::sample::select(vec![ResourceType::Topic, ResourceType::Group]),
            name in prop::sample::select(vec!["a", "ab", "abc", "abd", "b", "c", "*"]),
        ) {
            let super_users: BTreeSet<String> =
                if super_user { BTreeSet::from(["User:bob".to_string()]) } else { BTreeSet::new() };
            let authorizer = Authorizer {
                acls: Acls::new(bindings.clone()),
                super_users: super_users.clone(),
                allow_everyone_if_no_acl_found: allow_if_none,
            };
            let principal = KafkaPrincipal::user(who);
            prop_assert_eq!(
                authorizer.authorize(&principal, host, operation, resource_type, name),
                model(&bindings, &super_users, allow_if_none, &Query {
                    principal: &principal.to_string(),
                    host,
                    operation,
                    resource_type,
                    name,
                })
            );
        }

        #[test]
        fn removing_what_was_added_leaves_the_rest(
            bindings in prop::collection::vec(binding(), 0..12),
            drop in 0usize..12,
        ) {
            let mut acls = Acls::new(bindings.clone());
            let distinct: BTreeSet<AclBinding> = bindings.iter().cloned().collect();
            prop_assert_eq!(acls.len(), distinct.len());
            if let Some(gone) = bindings.get(drop) {
                prop_assert!(acls.remove(gone));
                prop_assert!(!acls.remove(gone));
                let rest: BTreeSet<&AclBinding> = acls.iter().collect();
                prop_assert_eq!(rest.len(), distinct.len() - 1);
                prop_assert!(!rest.contains(gone));
            }
        }
    }
}
