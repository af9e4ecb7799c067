//! Kafka's principal: a type and a name, written `User:alice`. Connections that proved
//! nothing (PLAINTEXT, or TLS without a client certificate) are `User:ANONYMOUS`, as in
//! Kafka.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KafkaPrincipal {
    pub principal_type: String,
    pub name: String,
}

impl KafkaPrincipal {
    pub const USER_TYPE: &'static str = "User";

    pub fn user(name: impl Into<String>) -> KafkaPrincipal {
        KafkaPrincipal {
            principal_type: Self::USER_TYPE.to_string(),
            name: name.into(),
        }
    }

    pub fn anonymous() -> KafkaPrincipal {
        KafkaPrincipal::user("ANONYMOUS")
    }

    /// Whether `text` (`Type:name`) names this principal, without allocating (the
    /// authorizer asks it of every ACL that concerns a resource).
    pub fn is(&self, text: &str) -> bool {
        text.split_once(':')
            .is_some_and(|(t, n)| t == self.principal_type && n == self.name)
    }

    /// `Type:name` as Kafka writes principals (ACLs, super.users); the name may itself
    /// hold colons (a distinguished name seldom does, a SASL user may).
    pub fn parse(text: &str) -> Option<KafkaPrincipal> {
        let (principal_type, name) = text.split_once(':')?;
        (!principal_type.is_empty()).then(|| KafkaPrincipal {
            principal_type: principal_type.to_string(),
            name: name.to_string(),
        })
    }
}

impl fmt::Display for KafkaPrincipal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_writes_kafka_principals() {
        let p = KafkaPrincipal::parse("User:CN=a,O=b").unwrap();
        assert_eq!(p, KafkaPrincipal::user("CN=a,O=b"));
        assert_eq!(p.to_string(), "User:CN=a,O=b");
        assert_eq!(KafkaPrincipal::parse("User:x:y").unwrap().name, "x:y");
        assert!(KafkaPrincipal::parse("alice").is_none());
        assert!(KafkaPrincipal::parse(":alice").is_none());
        assert_eq!(KafkaPrincipal::anonymous().to_string(), "User:ANONYMOUS");
    }
}
