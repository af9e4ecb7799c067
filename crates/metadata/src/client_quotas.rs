//! Client quotas (`kafka-configs --entity-type users/clients/ips`): which entities have
//! which quotas, the checks of AlterClientQuotas (Kafka's ClientQuotaControlManager, in its
//! words), the filters of DescribeClientQuotas (ClientQuotasImage) and which quota applies
//! to a (user, client id) by Kafka's precedence (KIP-55).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error_code;

pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

/// Kafka's quota keys and whether each is integral (LONG / INT) or not (DOUBLE).
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// (key, integral, the largest value) of users' and client ids' quotas.
const USER_AND_CLIENT_KEYS: &[(&str, bool, f64)] = &[
    (PRODUCER_BYTE_RATE, true, i64::MAX as f64),
    (CONSUMER_BYTE_RATE, true, i64::MAX as f64),
    (REQUEST_PERCENTAGE, false, f64::MAX),
    (CONTROLLER_MUTATION_RATE, false, f64::MAX),
];
const IP_KEYS: &[(&str, bool, f64)] = &[(CONNECTION_CREATION_RATE, true, i32::MAX as f64)];

/// A quota entity: entity type (user, client-id, ip) -> name, None for the default.
pub type QuotaEntity = BTreeMap<String, Option<String>>;

/// A quota entity as a request lists it: (entity type, name or None), in its order.
pub type ListedEntity = Vec<(String, Option<String>)>;

/// A quota's value; compared by its bits so images stay `Eq`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(transparent)]
pub struct QuotaValue(pub f64);

impl PartialEq for QuotaValue {
    fn eq(&self, other: &QuotaValue) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for QuotaValue {}

/// Every entity's quotas (stored as a list: JSON keys are strings).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Vec<(QuotaEntity, BTreeMap<String, QuotaValue>)>")]
#[serde(into = "Vec<(QuotaEntity, BTreeMap<String, QuotaValue>)>")]
pub struct ClientQuotas {
    pub entities: BTreeMap<QuotaEntity, BTreeMap<String, QuotaValue>>,
}

impl From<Vec<(QuotaEntity, BTreeMap<String, QuotaValue>)>> for ClientQuotas {
    fn from(list: Vec<(QuotaEntity, BTreeMap<String, QuotaValue>)>) -> ClientQuotas {
        ClientQuotas {
            entities: list.into_iter().collect(),
        }
    }
}

impl From<ClientQuotas> for Vec<(QuotaEntity, BTreeMap<String, QuotaValue>)> {
    fn from(quotas: ClientQuotas) -> Self {
        quotas.entities.into_iter().collect()
    }
}

/// An error of AlterClientQuotas or DescribeClientQuotas: (code, Kafka's message).
pub type QuotaError = (i16, String);

fn invalid(message: impl Into<String>) -> QuotaError {
    (error_code::INVALID_REQUEST, message.into())
}

/// How Kafka prints an entity in its messages (ClientQuotaEntity.toString).
pub fn entity_text(entity: &[(String, Option<String>)]) -> String {
    let entries: Vec<String> = entity
        .iter()
        .map(|(t, n)| format!("{t}={}", n.as_deref().unwrap_or("null")))
        .collect();
    format!("ClientQuotaEntity(entries={{{}}})", entries.join(", "))
}

impl ClientQuotas {
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// Sets (Some) or removes (None) one quota of an entity.
    pub fn set(&mut self, entity: &QuotaEntity, key: &str, value: Option<QuotaValue>) {
        match value {
            Some(value) => {
                self.entities
                    .entry(entity.clone())
                    .or_default()
                    .insert(key.to_string(), value);
            }
            None => {
                if let Some(quotas) = self.entities.get_mut(entity) {
                    quotas.remove(key);
                    if quotas.is_empty() {
                        self.entities.remove(entity);
                    }
                }
            }
        }
    }

    /// Kafka's checks of one alteration (entity as the request lists it, operations as
    /// (key, None to remove)); the changes to make: (key, new value or None).
    #[allow(clippy::type_complexity)]
    pub fn check_alteration(
        &self,
        entity: &[(String, Option<String>)],
        ops: &[(String, Option<QuotaValue>)],
    ) -> Result<(QuotaEntity, Vec<(String, Option<QuotaValue>)>), QuotaError> {
        let mut keys = std::collections::BTreeSet::new();
        if ops.iter().any(|(key, _)| !keys.insert(key)) {
            // Kafka reports the duplicate key under the duplicate-entity message.
            return Err(invalid(format!(
                "Ignoring duplicate entity {}",
                entity_text(entity)
            )));
        }
        if entity.is_empty() {
            return Err(invalid("Invalid empty client quota entity"));
        }
        let mut checked = QuotaEntity::new();
        for (entity_type, name) in entity {
            if checked.contains_key(entity_type) {
                return Err(invalid(format!(
                    "Invalid client quota entity, duplicate entity entry {entity_type}"
                )));
            }
            if ![USER, CLIENT_ID, IP].contains(&entity_type.as_str()) {
                return Err(invalid(format!(
                    "Unhandled client quota entity type: {entity_type}"
                )));
            }
            if name.as_deref() == Some("") {
                return Err(invalid(format!("Empty {entity_type} not supported")));
            }
            checked.insert(entity_type.clone(), name.clone());
        }
        let valid_keys = if let Some(ip) = checked.get(IP) {
            if checked.contains_key(USER) || checked.contains_key(CLIENT_ID) {
                return Err(invalid(
                    "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
                ));
            }
            if let Some(ip) = ip {
                if ip.parse::<std::net::IpAddr>().is_err() {
                    return Err(invalid(format!(
                        "{ip} is not a valid IP or resolvable host."
                    )));
                }
            }
            IP_KEYS
        } else {
            USER_AND_CLIENT_KEYS
        };
        let current = self.entities.get(&checked);
        let mut changes = Vec::new();
        for (key, value) in ops {
            match value {
                None => {
                    if current.is_some_and(|c| c.contains_key(key)) {
                        changes.push((key.clone(), None));
                    }
                }
                Some(QuotaValue(value)) => {
                    let Some((_, integral, max)) = valid_keys.iter().find(|(k, ..)| k == key)
                    else {
                        return Err(invalid(format!("Invalid configuration key {key}")));
                    };
                    if *value <= 0.0 {
                        return Err(invalid(format!("Quota {key} must be greater than 0")));
                    }
                    if *integral {
                        if *value > *max {
                            let kind = if *max > i32::MAX as f64 {
                                "a LONG"
                            } else {
                                "an INT"
                            };
                            return Err(invalid(format!(
                                "Proposed value for {key} is too large for {kind}."
                            )));
                        }
                        if (value % 1.0).abs() > 1e-6 {
                            return Err(invalid(format!("{key} cannot be a fractional value.")));
                        }
                    }
                    let value = QuotaValue(*value);
                    if current.and_then(|c| c.get(key)) != Some(&value) {
                        changes.push((key.clone(), Some(value)));
                    }
                }
            }
        }
        Ok((checked, changes))
    }

    /// DescribeClientQuotas: the entities a filter matches, or Kafka's refusal of the
    /// filter. Components are (entity type, match type: 0 exact, 1 default, 2 any of the
    /// type, match).
    #[allow(clippy::type_complexity)]
    pub fn describe(
        &self,
        components: &[(String, i8, Option<String>)],
        strict: bool,
    ) -> Result<Vec<(&QuotaEntity, &BTreeMap<String, QuotaValue>)>, QuotaError> {
        let mut exact: BTreeMap<&str, Option<&str>> = BTreeMap::new();
        let mut of_type: Vec<&str> = Vec::new();
        for (entity_type, match_type, name) in components {
            let entity_type = entity_type.as_str();
            if entity_type.is_empty() {
                return Err(invalid("Invalid empty entity type."));
            }
            if exact.contains_key(entity_type) || of_type.contains(&entity_type) {
                return Err(invalid(format!(
                    "Entity type {entity_type} cannot appear more than once in the filter."
                )));
            }
            if ![USER, CLIENT_ID, IP].contains(&entity_type) {
                return Err((
                    error_code::UNSUPPORTED_VERSION,
                    format!("Unsupported entity type {entity_type}"),
                ));
            }
            match (match_type, name) {
                (0, None) => {
                    return Err(invalid(
                        "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                    ))
                }
                (0, Some(name)) => {
                    exact.insert(entity_type, Some(name));
                }
                (1, Some(_)) => {
                    return Err(invalid(
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                    ))
                }
                (1, None) => {
                    exact.insert(entity_type, None);
                }
                (2, Some(_)) => return Err(invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                )),
                (2, None) => of_type.push(entity_type),
                (other, _) => return Err(invalid(format!("Unknown match type {other}"))),
            }
        }
        let names = |t: &str| exact.contains_key(t) || of_type.contains(&t);
        if names(IP) && (names(USER) || names(CLIENT_ID)) {
            return Err(invalid(
                "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.",
            ));
        }
        Ok(self
            .entities
            .iter()
            .filter(|(entity, _)| {
                (!strict || entity.len() == exact.len() + of_type.len())
                    && exact
                        .iter()
                        .all(|(t, name)| entity.get(*t).is_some_and(|n| n.as_deref() == *name))
                    && of_type.iter().all(|t| entity.contains_key(*t))
            })
            .collect())
    }

    /// The connection_creation_rate of an address: its own, else the default ip's.
    pub fn ip_connection_rate(&self, ip: &str) -> Option<f64> {
        [Some(ip.to_string()), None].into_iter().find_map(|name| {
            let entity = QuotaEntity::from([(IP.to_string(), name)]);
            Some(self.entities.get(&entity)?.get(CONNECTION_CREATION_RATE)?.0)
        })
    }

    /// The quota `key` that applies to a client (Kafka's precedence, most specific
    /// first), with the (user, client id) its usage is counted under: a quota of a user
    /// alone is shared by all that user's client ids, one of a client id alone by every
    /// user of it.
    pub fn applicable(
        &self,
        user: &str,
        client_id: &str,
        key: &str,
    ) -> Option<(f64, (String, String))> {
        let entity = |user: Option<Option<&str>>, client: Option<Option<&str>>| {
            let mut entity = QuotaEntity::new();
            if let Some(user) = user {
                entity.insert(USER.to_string(), user.map(str::to_string));
            }
            if let Some(client) = client {
                entity.insert(CLIENT_ID.to_string(), client.map(str::to_string));
            }
            entity
        };
        let both = (user.to_string(), client_id.to_string());
        let user_only = (user.to_string(), String::new());
        let client_only = (String::new(), client_id.to_string());
        let levels = [
            (entity(Some(Some(user)), Some(Some(client_id))), &both),
            (entity(Some(Some(user)), Some(None)), &both),
            (entity(Some(Some(user)), None), &user_only),
            (entity(Some(None), Some(Some(client_id))), &both),
            (entity(Some(None), Some(None)), &both),
            (entity(Some(None), None), &user_only),
            (entity(None, Some(Some(client_id))), &client_only),
            (entity(None, Some(None)), &client_only),
        ];
        let found = levels.into_iter().find_map(|(entity, counted)| {
            let value = self.entities.get(&entity)?.get(key)?;
            Some((value.0, counted.clone()))
        });
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(parts: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
        parts
            .iter()
            .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
            .collect()
    }

    fn apply(quotas: &mut ClientQuotas, parts: &[(&str, Option<&str>)], key: &str, value: f64) {
        let (entity, changes) = quotas
            .check_alteration(
                &entity(parts),
                &[(key.to_string(), Some(QuotaValue(value)))],
            )
            .unwrap();
        for (key, value) in changes {
            quotas.set(&entity, &key, value);
        }
    }

    #[test]
    fn alterations_are_checked_with_kafkas_words() {
        let quotas = ClientQuotas::default();
        let check = |parts: &[(&str, Option<&str>)], key: &str, value: Option<f64>| {
            quotas
                .check_alteration(&entity(parts), &[(key.to_string(), value.map(QuotaValue))])
                .err()
                .map(|(_, message)| message)
        };
        let user = [("user", Some("alice"))];
        assert_eq!(check(&user, PRODUCER_BYTE_RATE, Some(1024.0)), None);
        assert_eq!(
            check(&user, PRODUCER_BYTE_RATE, Some(0.5)).as_deref(),
            Some("producer_byte_rate cannot be a fractional value.")
        );
        assert_eq!(
            check(&user, REQUEST_PERCENTAGE, Some(0.0)).as_deref(),
            Some("Quota request_percentage must be greater than 0")
        );
        assert_eq!(check(&user, REQUEST_PERCENTAGE, Some(12.5)), None);
        assert_eq!(
            check(&user, "nonsense", Some(1.0)).as_deref(),
            Some("Invalid configuration key nonsense")
        );
        assert_eq!(
            check(&user, CONNECTION_CREATION_RATE, Some(1.0)).as_deref(),
            Some("Invalid configuration key connection_creation_rate")
        );
        assert_eq!(
            check(
                &[("ip", Some("10.0.0.1"))],
                CONNECTION_CREATION_RATE,
                Some(5.0)
            ),
            None
        );
        assert_eq!(
            check(&[("ip", Some("10.0.0.1")), ("user", Some("a"))], CONNECTION_CREATION_RATE, Some(5.0))
                .as_deref(),
            Some("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
        );
        assert_eq!(
            check(&[("group", Some("g"))], PRODUCER_BYTE_RATE, Some(1.0)).as_deref(),
            Some("Unhandled client quota entity type: group")
        );
        assert_eq!(
            check(&[("user", Some(""))], PRODUCER_BYTE_RATE, Some(1.0)).as_deref(),
            Some("Empty user not supported")
        );
        let twice = quotas.check_alteration(
            &entity(&user),
            &[
                (CONSUMER_BYTE_RATE.into(), Some(QuotaValue(1.0))),
                (CONSUMER_BYTE_RATE.into(), None),
            ],
        );
        assert_eq!(
            twice.err().map(|(_, m)| m).as_deref(),
            Some("Ignoring duplicate entity ClientQuotaEntity(entries={user=alice})")
        );
    }

    #[test]
    fn the_most_specific_quota_applies_and_is_counted_at_its_level() {
        let mut quotas = ClientQuotas::default();
        assert_eq!(quotas.applicable("alice", "app", PRODUCER_BYTE_RATE), None);
        apply(
            &mut quotas,
            &[("client-id", None)],
            PRODUCER_BYTE_RATE,
            100.0,
        );
        let counted =
            |q: &ClientQuotas, user, client| q.applicable(user, client, PRODUCER_BYTE_RATE);
        assert_eq!(
            counted(&quotas, "alice", "app"),
            Some((100.0, (String::new(), "app".into())))
        );
        apply(&mut quotas, &[("user", None)], PRODUCER_BYTE_RATE, 200.0);
        assert_eq!(
            counted(&quotas, "alice", "app"),
            Some((200.0, ("alice".into(), String::new())))
        );
        apply(
            &mut quotas,
            &[("user", Some("alice"))],
            PRODUCER_BYTE_RATE,
            300.0,
        );
        apply(
            &mut quotas,
            &[("user", Some("alice")), ("client-id", Some("app"))],
            PRODUCER_BYTE_RATE,
            400.0,
        );
        assert_eq!(
            counted(&quotas, "alice", "app"),
            Some((400.0, ("alice".into(), "app".into())))
        );
        assert_eq!(
            counted(&quotas, "alice", "other"),
            Some((300.0, ("alice".into(), String::new())))
        );
        assert_eq!(
            counted(&quotas, "bob", "other"),
            Some((200.0, ("bob".into(), String::new())))
        );
        assert_eq!(quotas.applicable("bob", "other", CONSUMER_BYTE_RATE), None);
    }

    #[test]
    fn filters_match_as_kafkas_image_does() {
        let mut quotas = ClientQuotas::default();
        apply(
            &mut quotas,
            &[("user", Some("alice"))],
            PRODUCER_BYTE_RATE,
            1.0,
        );
        apply(&mut quotas, &[("user", None)], PRODUCER_BYTE_RATE, 2.0);
        apply(
            &mut quotas,
            &[("user", Some("alice")), ("client-id", Some("app"))],
            PRODUCER_BYTE_RATE,
            3.0,
        );
        apply(
            &mut quotas,
            &[("ip", Some("10.0.0.1"))],
            CONNECTION_CREATION_RATE,
            4.0,
        );
        let count = |components: &[(&str, i8, Option<&str>)], strict| {
            let components: Vec<(String, i8, Option<String>)> = components
                .iter()
                .map(|(t, m, n)| (t.to_string(), *m, n.map(str::to_string)))
                .collect();
            quotas
                .describe(&components, strict)
                .map(|found| found.len())
        };
        assert_eq!(count(&[], false), Ok(4));
        assert_eq!(count(&[], true), Ok(0));
        assert_eq!(count(&[("user", 0, Some("alice"))], false), Ok(2));
        assert_eq!(count(&[("user", 0, Some("alice"))], true), Ok(1));
        assert_eq!(count(&[("user", 1, None)], false), Ok(1));
        assert_eq!(count(&[("user", 2, None)], false), Ok(3));
        assert_eq!(count(&[("ip", 2, None)], true), Ok(1));
        assert!(count(&[("ip", 2, None), ("user", 2, None)], false).is_err());
        assert!(count(&[("user", 0, None)], false).is_err());
        assert_eq!(
            count(&[("group", 2, None)], false).unwrap_err().0,
            error_code::UNSUPPORTED_VERSION
        );
        let json = serde_json::to_string(&quotas).unwrap();
        assert_eq!(serde_json::from_str::<ClientQuotas>(&json).unwrap(), quotas);
    }
}
