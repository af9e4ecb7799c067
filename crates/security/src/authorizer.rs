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

use serde::{Deserialize, Serialize};

use crate::KafkaPrincipal;

/// Kafka's ResourceType codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
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

    /// KIP-430's bitfield of `operations` (bit n for the operation of code n).
    pub fn operation_bits<'a>(operations: impl IntoIterator<Item = &'a AclOperation>) -> i32 {
        operations
            .into_iter()
            .fold(0, |bits, op| bits | (1 << op.code()))
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
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

impl AclBinding {
    /// Whether the ACL names this principal (or every one) and host (or every one).
    fn applies_to(&self, principal: &KafkaPrincipal, host: &str) -> bool {
        (self.principal == WILDCARD_PRINCIPAL || principal.is(&self.principal))
            && (self.host == host || self.host == WILDCARD)
    }

    /// Whether the ACL is about `operation` (or ALL).
    fn names(&self, operation: AclOperation) -> bool {
        self.operation == operation || self.operation == AclOperation::All
    }
}

/// Every prefix of `name`, shortest first (PREFIXED ACLs are looked up by them).
fn prefixes(name: &str) -> impl Iterator<Item = &str> {
    name.char_indices()
        .map(move |(at, c)| &name[..at + c.len_utf8()])
}

/// The name a LITERAL ACL gives to mean every resource of its type.
pub const WILDCARD: &str = "*";
/// The principal that means every principal.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// The ACLs of a cluster, indexed by the resource pattern they name (stored as a plain
/// list).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Vec<AclBinding>", into = "Vec<AclBinding>")]
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

    /// The ACLs about resources of one type.
    fn of_type(&self, resource_type: ResourceType) -> impl Iterator<Item = &AclBinding> {
        self.by_pattern
            .range((resource_type, PatternType::Literal)..=(resource_type, PatternType::Prefixed))
            .flat_map(|(_, names)| names.values())
            .flatten()
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

    pub fn contains(&self, binding: &AclBinding) -> bool {
        self.by_pattern
            .get(&(binding.resource_type, binding.pattern_type))
            .and_then(|names| names.get(&binding.resource_name))
            .is_some_and(|set| set.contains(binding))
    }

    /// The ACLs a DescribeAcls or DeleteAcls filter matches.
    pub fn matching<'a>(&'a self, filter: &'a AclFilter) -> impl Iterator<Item = &'a AclBinding> {
        self.iter().filter(move |binding| filter.matches(binding))
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
        let literals = self.by_pattern.get(&(resource_type, PatternType::Literal));
        let wildcard = (name != WILDCARD).then_some(WILDCARD);
        let literal = literals.into_iter().flat_map(move |names| {
            std::iter::once(name)
                .chain(wildcard)
                .filter_map(move |key| names.get(key))
        });
        let prefixes = self.by_pattern.get(&(resource_type, PatternType::Prefixed));
        let prefixed = prefixes.into_iter().flat_map(move |names| {
            self::prefixes(name).filter_map(move |prefix| names.get(prefix))
        });
        literal.chain(prefixed).flatten()
    }
}

impl From<Vec<AclBinding>> for Acls {
    fn from(bindings: Vec<AclBinding>) -> Acls {
        Acls::new(bindings)
    }
}

impl From<Acls> for Vec<AclBinding> {
    fn from(acls: Acls) -> Vec<AclBinding> {
        acls.iter().cloned().collect()
    }
}

/// Which stored patterns a filter's pattern type selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PatternFilter {
    /// ANY: every pattern type, the name compared as it is.
    Any,
    /// MATCH: the patterns that would apply to a resource of that name (LITERAL of it or
    /// of `*`, PREFIXED of a prefix of it).
    Match,
    /// Only this pattern type, the name compared as it is.
    Exactly(PatternType),
}

impl PatternFilter {
    /// Kafka's PatternType code in a filter (ANY 1, MATCH 2, LITERAL 3, PREFIXED 4).
    pub fn from_code(code: i8) -> Option<PatternFilter> {
        match code {
            1 => Some(PatternFilter::Any),
            2 => Some(PatternFilter::Match),
            _ => PatternType::from_code(code).map(PatternFilter::Exactly),
        }
    }
}

/// A DescribeAcls or DeleteAcls filter (Kafka's AclBindingFilter): None matches anything.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AclFilter {
    pub resource_type: Option<ResourceType>,
    pub resource_name: Option<String>,
    pub pattern: PatternFilter,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Option<AclOperation>,
    pub permission: Option<Permission>,
}

impl AclFilter {
    /// A filter matching every ACL.
    pub fn any() -> AclFilter {
        AclFilter {
            resource_type: None,
            resource_name: None,
            pattern: PatternFilter::Any,
            principal: None,
            host: None,
            operation: None,
            permission: None,
        }
    }

    /// Kafka's ResourcePatternFilter.matches and AccessControlEntryFilter.matches.
    pub fn matches(&self, binding: &AclBinding) -> bool {
        let entry_matches = self
            .principal
            .as_ref()
            .is_none_or(|p| *p == binding.principal)
            && self.host.as_ref().is_none_or(|h| *h == binding.host)
            && self.operation.is_none_or(|o| o == binding.operation)
            && self.permission.is_none_or(|p| p == binding.permission);
        entry_matches && self.pattern_matches(binding)
    }

    fn pattern_matches(&self, binding: &AclBinding) -> bool {
        if self
            .resource_type
            .is_some_and(|t| t != binding.resource_type)
        {
            return false;
        }
        if let PatternFilter::Exactly(pattern_type) = self.pattern {
            if pattern_type != binding.pattern_type {
                return false;
            }
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        match self.pattern {
            PatternFilter::Any | PatternFilter::Exactly(_) => *name == binding.resource_name,
            PatternFilter::Match => match binding.pattern_type {
                PatternType::Literal => {
                    *name == binding.resource_name || binding.resource_name == WILDCARD
                }
                PatternType::Prefixed => name.starts_with(&binding.resource_name),
            },
        }
    }
}

/// The name of the one CLUSTER resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// Who may do what, given the ACLs: super.users and allow.everyone.if.no.acl.found (the
/// ACLs themselves live in the cluster's metadata and are passed to each decision).
#[derive(Debug, Clone, Default)]
pub struct Authorizer {
    pub super_users: BTreeSet<String>,
    pub allow_everyone_if_no_acl_found: bool,
}

impl Authorizer {
    /// Kafka's super.users: principals separated by `;`.
    pub fn parse_super_users(value: &str) -> BTreeSet<String> {
        value
            .split(';')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// May `principal`, connected from `host`, do `operation` on the resource?
    pub fn authorize(
        &self,
        acls: &Acls,
        principal: &KafkaPrincipal,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        if self.super_users.iter().any(|user| principal.is(user)) {
            return true;
        }
        let mut concerned = false;
        let mut allowed = false;
        for acl in acls.concerning(resource_type, name) {
            concerned = true;
            if !acl.applies_to(principal, host) {
                continue;
            }
            match acl.permission {
                Permission::Deny => {
                    if acl.names(operation) {
                        return false;
                    }
                }
                Permission::Allow => {
                    allowed |= acl.names(operation)
                        || acl.operation.implied_by_allow().contains(&operation);
                }
            }
        }
        if !concerned {
            return self.allow_everyone_if_no_acl_found;
        }
        allowed
    }

    /// Kafka's authorizeByResourceType: may the principal do `operation` on some resource
    /// of the type? (InitProducerId lets an idempotent producer in with WRITE on any
    /// topic.) A super user or the no-ACL default on an unnamed resource says yes; a DENY
    /// on `*` says no; else yes if some ALLOW names a resource no DENY covers.
    pub fn authorize_by_resource_type(
        &self,
        acls: &Acls,
        principal: &KafkaPrincipal,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        // Kafka asks about a made-up name first, so super users (and the no-ACL default)
        // are allowed whatever DENYs exist.
        if self.authorize(acls, principal, host, operation, resource_type, "hardcode") {
            return true;
        }
        let mut denied: BTreeMap<PatternType, BTreeSet<&str>> = BTreeMap::new();
        let mut allowed: Vec<&AclBinding> = Vec::new();
        let applying = acls
            .of_type(resource_type)
            .filter(|acl| acl.applies_to(principal, host) && acl.names(operation));
        for acl in applying {
            match acl.permission {
                Permission::Deny => {
                    if acl.pattern_type == PatternType::Literal && acl.resource_name == WILDCARD {
                        return false;
                    }
                    denied
                        .entry(acl.pattern_type)
                        .or_default()
                        .insert(&acl.resource_name);
                }
                Permission::Allow => {
                    if acl.pattern_type == PatternType::Literal && acl.resource_name == WILDCARD {
                        return true;
                    }
                    allowed.push(acl);
                }
            }
        }
        let no_names = BTreeSet::new();
        let denied_literal = denied.get(&PatternType::Literal).unwrap_or(&no_names);
        let denied_prefixes = denied.get(&PatternType::Prefixed).unwrap_or(&no_names);
        allowed.iter().any(|acl| {
            let name = acl.resource_name.as_str();
            if acl.pattern_type == PatternType::Literal && denied_literal.contains(name) {
                return false;
            }
            !prefixes(name).any(|prefix| denied_prefixes.contains(prefix))
        })
    }

    /// KIP-430's authorized-operations bitfield: bit n set for each operation (code n)
    /// of the resource type the principal may do.
    pub fn authorized_operations(
        &self,
        acls: &Acls,
        principal: &KafkaPrincipal,
        host: &str,
        resource_type: ResourceType,
        name: &str,
    ) -> i32 {
        ResourceType::operation_bits(
            resource_type
                .operations()
                .iter()
                .filter(|op| self.authorize(acls, principal, host, **op, resource_type, name)),
        )
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
        let acls = Acls::new([
            acl(Topic, "orders", Literal, "User:alice", Read, Allow),
            acl(Topic, "pay-", Prefixed, "User:*", Write, Allow),
            acl(Topic, "pay-secret", Literal, "User:alice", All, Deny),
            acl(Topic, "*", Literal, "User:bob", Describe, Allow),
            acl(Group, "g", Literal, "User:alice", AlterConfigs, Allow),
        ]);
        let authorizer = Authorizer {
            super_users: Authorizer::parse_super_users("User:admin; User:root"),
            allow_everyone_if_no_acl_found: false,
        };
        let may = |who: &str, op, ty, name: &str| {
            authorizer.authorize(&acls, &KafkaPrincipal::user(who), "10.0.0.1", op, ty, name)
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
        assert!(open.authorize(&acls, &alice(), "h", Read, Group, "other"));
        assert!(
            !open.authorize(&acls, &alice(), "h", Read, Topic, "orders-2"),
            "bob's wildcard ACL concerns every topic"
        );
        assert_eq!(
            authorizer.authorized_operations(&acls, &alice(), "h", Topic, "orders"),
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
        let acls = Acls::new([
            acl(
                ResourceType::Topic,
                "t",
                PatternType::Literal,
                "User:alice",
                All,
                Permission::Allow,
            ),
            deny_read,
        ]);
        let authorizer = Authorizer::default();
        let may = |host, operation| {
            authorizer.authorize(&acls, &alice(), host, operation, ResourceType::Topic, "t")
        };
        assert!(!may("10.0.0.9", Read));
        assert!(may("10.0.0.8", Read));
        assert!(
            may("10.0.0.9", Describe),
            "a DENY of READ does not deny DESCRIBE"
        );
    }

    #[test]
    fn by_resource_type_an_allow_not_covered_by_a_deny_is_enough() {
        use AclOperation::*;
        use PatternType::*;
        use Permission::*;
        let topic = ResourceType::Topic;
        let authorizer = Authorizer {
            super_users: Authorizer::parse_super_users("User:admin"),
            allow_everyone_if_no_acl_found: false,
        };
        let may = |acls: &[AclBinding], who: &str| {
            let acls = Acls::new(acls.iter().cloned());
            authorizer.authorize_by_resource_type(
                &acls,
                &KafkaPrincipal::user(who),
                "h",
                Write,
                topic,
            )
        };
        let allow_orders = acl(topic, "orders", Literal, "User:alice", Write, Allow);
        assert!(may(std::slice::from_ref(&allow_orders), "alice"));
        assert!(!may(std::slice::from_ref(&allow_orders), "bob"));
        assert!(!may(&[], "alice"), "no ACL at all: denied by default");
        assert!(may(&[], "admin"), "super users");
        let deny_prefix = acl(topic, "ord", Prefixed, "User:*", All, Deny);
        assert!(!may(&[allow_orders.clone(), deny_prefix], "alice"));
        let deny_other = acl(topic, "other", Literal, "User:alice", Write, Deny);
        assert!(may(&[allow_orders.clone(), deny_other], "alice"));
        let deny_all = acl(topic, "*", Literal, "User:alice", Write, Deny);
        assert!(!may(&[allow_orders.clone(), deny_all], "alice"));
        let read_only = acl(topic, "orders", Literal, "User:alice", Read, Allow);
        assert!(!may(&[read_only], "alice"), "another operation");
    }

    #[test]
    fn filters_compare_names_as_kafka_does() {
        use AclOperation::*;
        let literal = acl(
            ResourceType::Topic,
            "orders",
            PatternType::Literal,
            "User:a",
            Read,
            Permission::Allow,
        );
        let wildcard = acl(
            ResourceType::Topic,
            "*",
            PatternType::Literal,
            "User:a",
            Read,
            Permission::Allow,
        );
        let prefixed = acl(
            ResourceType::Topic,
            "ord",
            PatternType::Prefixed,
            "User:b",
            Write,
            Permission::Deny,
        );
        let acls = Acls::new([literal.clone(), wildcard.clone(), prefixed.clone()]);
        let find = |filter: AclFilter| acls.matching(&filter).cloned().collect::<Vec<_>>();
        let named = |pattern| AclFilter {
            resource_name: Some("orders".into()),
            pattern,
            ..AclFilter::any()
        };
        assert_eq!(find(named(PatternFilter::Any)), vec![literal.clone()]);
        assert_eq!(
            find(named(PatternFilter::Exactly(PatternType::Prefixed))),
            vec![]
        );
        assert_eq!(find(named(PatternFilter::Match)).len(), 3);
        assert_eq!(
            find(AclFilter {
                principal: Some("User:b".into()),
                ..AclFilter::any()
            }),
            vec![prefixed.clone()]
        );
        assert_eq!(
            find(AclFilter {
                operation: Some(Read),
                permission: Some(Permission::Allow),
                ..AclFilter::any()
            })
            .len(),
            2
        );
        assert_eq!(
            find(AclFilter {
                host: Some("10.0.0.1".into()),
                ..AclFilter::any()
            }),
            vec![]
        );
        let json = serde_json::to_string(&acls).unwrap();
        assert_eq!(serde_json::from_str::<Acls>(&json).unwrap(), acls);
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
            let acls = Acls::new(bindings.clone());
            let authorizer = Authorizer {
                super_users: super_users.clone(),
                allow_everyone_if_no_acl_found: allow_if_none,
            };
            let principal = KafkaPrincipal::user(who);
            prop_assert_eq!(
                authorizer.authorize(&acls, &principal, host, operation, resource_type, name),
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
        fn a_match_filter_finds_exactly_the_acls_that_concern_a_resource(
            bindings in prop::collection::vec(binding(), 0..12),
            resource_type in prop::sample::select(vec![ResourceType::Topic, ResourceType::Group]),
            name in prop::sample::select(vec!["a", "ab", "abc", "abd", "b", "c"]),
        ) {
            let acls = Acls::new(bindings.clone());
            let filter = AclFilter {
                resource_type: Some(resource_type),
                resource_name: Some(name.to_string()),
                pattern: PatternFilter::Match,
                ..AclFilter::any()
            };
            let matched: BTreeSet<&AclBinding> = acls.matching(&filter).collect();
            let concerning: BTreeSet<&AclBinding> = acls.concerning(resource_type, name).collect();
            prop_assert_eq!(matched, concerning);
            prop_assert_eq!(acls.matching(&AclFilter::any()).count(), acls.len());
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
