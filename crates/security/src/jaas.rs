//! JAAS configuration entries as Kafka reads `sasl.jaas.config`:
//! `LoginModuleClass flag key="value" key2=value2;`. Kafka's brokers take one login
//! module per `listener.name.NAME.MECHANISM.sasl.jaas.config`; its options carry, for
//! PLAIN, the users (`user_alice="alice-secret"`).
//!
//! The syntax follows Java's StreamTokenizer as Kafka's JaasConfig uses it: words,
//! double-quoted strings with backslash escapes, `//` and `/* */` comments.

use std::collections::BTreeMap;

/// One login module of a JAAS entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginModule {
    pub class_name: String,
    /// required, requisite, sufficient or optional.
    pub flag: String,
    pub options: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Equals,
    Semicolon,
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '=' => {
                chars.next();
                tokens.push(Token::Equals);
            }
            ';' => {
                chars.next();
                tokens.push(Token::Semicolon);
            }
            '"' => {
                chars.next();
                let mut value = String::new();
                loop {
                    match chars.next() {
                        None => return Err("unterminated quoted string".into()),
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some('n') => value.push('\n'),
                            Some('t') => value.push('\t'),
                            Some('r') => value.push('\r'),
                            Some(other) => value.push(other),
                            None => return Err("unterminated quoted string".into()),
                        },
                        Some(other) => value.push(other),
                    }
                }
                tokens.push(Token::Quoted(value));
            }
            '/' => {
                chars.next();
                match chars.next() {
                    Some('/') => {
                        for c in chars.by_ref() {
                            if c == '\n' {
                                break;
                            }
                        }
                    }
                    Some('*') => {
                        let mut last = ' ';
                        let mut closed = false;
                        for c in chars.by_ref() {
                            if last == '*' && c == '/' {
                                closed = true;
                                break;
                            }
                            last = c;
                        }
                        if !closed {
                            return Err("unterminated comment".into());
                        }
                    }
                    _ => return Err("unexpected '/'".into()),
                }
            }
            _ => {
                let mut word = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() || matches!(c, '=' | ';' | '"') {
                        break;
                    }
                    word.push(c);
                    chars.next();
                }
                tokens.push(Token::Word(word));
            }
        }
    }
    Ok(tokens)
}

/// Parses a JAAS configuration value into its login modules; Kafka's messages for a
/// value it cannot read.
pub fn parse(text: &str) -> Result<Vec<LoginModule>, String> {
    let tokens = tokenize(text).map_err(|e| format!("Invalid JAAS config: {e}"))?;
    let mut modules = Vec::new();
    let mut rest = tokens.as_slice();
    while !rest.is_empty() {
        let (class_name, flag) = match rest {
            [Token::Word(class), Token::Word(flag), ..] => (class.clone(), flag.to_lowercase()),
            _ => return Err("Invalid JAAS config: expected a login module and its flag".into()),
        };
        if !["required", "requisite", "sufficient", "optional"].contains(&flag.as_str()) {
            return Err(format!("Invalid JAAS config: invalid control flag {flag}"));
        }
        rest = &rest[2..];
        let mut options = BTreeMap::new();
        loop {
            match rest {
                [Token::Semicolon, tail @ ..] => {
                    rest = tail;
                    break;
                }
                [Token::Word(key), Token::Equals, Token::Word(value) | Token::Quoted(value), tail @ ..] =>
                {
                    options.insert(key.clone(), value.clone());
                    rest = tail;
                }
                _ => {
                    return Err(format!(
                        "Invalid JAAS config: expected option=value or ';' in the entry of {class_name}"
                    ))
                }
            }
        }
        modules.push(LoginModule {
            class_name,
            flag,
            options,
        });
    }
    Ok(modules)
}

/// The single login module Kafka requires of a `sasl.jaas.config` value.
pub fn parse_single(text: &str) -> Result<LoginModule, String> {
    let mut modules = parse(text)?;
    match modules.len() {
        1 => Ok(modules.remove(0)),
        n => Err(format!(
            "JAAS config property contains {n} login modules, should be 1 module"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kafkas_plain_entry() {
        let module = parse_single(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required
               username="admin" password="admin-secret"
               user_admin="admin-secret" // the broker's own user
               user_alice="al\"ice" /* quoted quote */ user_bob=bob;"#,
        )
        .unwrap();
        assert_eq!(
            module.class_name,
            "org.apache.kafka.common.security.plain.PlainLoginModule"
        );
        assert_eq!(module.flag, "required");
        assert_eq!(module.options["user_admin"], "admin-secret");
        assert_eq!(module.options["user_alice"], "al\"ice");
        assert_eq!(module.options["user_bob"], "bob");
        assert_eq!(module.options.len(), 5);
    }

    #[test]
    fn refuses_what_kafka_refuses() {
        assert!(parse_single("Module required a=\"b\"").is_err()); // no ';'
        assert!(parse_single("Module sometimes;").is_err());
        assert!(parse_single("A required; B required;").is_err());
        assert!(parse_single("").is_err());
        assert!(parse_single("Module required a=\"b;").is_err());
    }
}
